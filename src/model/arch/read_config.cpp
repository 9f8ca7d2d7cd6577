// read_config (declared in model/base/config.h): the architecture's row first, so that an unknown architecture is
// named before any of its keys is read.
#include "model/arch/registry.h"
#include "model/base/config.h"
#include "util/error.h"

namespace preface::model {

Config read_config(const gguf::File& file) {
  const std::string name = file.get_string("general.architecture");
  const Architecture* arch = find_architecture(name);
  if (arch == nullptr) throw Error("unsupported architecture '" + name + "' (supported: " + architecture_names() + ")");
  Config c = read_common_config(file, name);
  c.rope_neox = arch->rope_neox;
  c.qkv_bias = arch->qkv_bias;
  c.qk_norm = arch->qk_norm;
  c.fused_projections = arch->fused_projections;
  if (arch->read != nullptr) arch->read(file, name + ".", c);
  return c;
}

}  // namespace preface::model
