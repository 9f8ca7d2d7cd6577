// The chat template renderers: one function per family, each transcribing the reference Jinja template named
// in chat_template.h (string for string; `trim`/`.strip()` are Python's str.strip()).
#include <optional>
#include <span>

#include "chat/chat_template.h"
#include "util/error.h"

namespace preface::chat {
namespace {

enum class Role { System, User, Assistant };

struct Turn {
  Role role;
  const std::string* role_text;  // the caller's role string, as ChatML/Phi-3/Zephyr/Llama-3 print it
  std::string_view content;
};

// Validated messages of one render call.
struct Conversation {
  ChatTemplate tmpl;
  std::vector<Turn> turns;  // [n_messages]
};

[[noreturn]] void fail(ChatTemplate t, const std::string& what) {
  throw Error(std::string("chat template ") + chat_template_name(t) + ": " + what);
}

Conversation validate(ChatTemplate t, const std::vector<ChatMessage>& messages) {
  if (messages.empty()) fail(t, "no messages to render");
  Conversation conv{t, {}};
  conv.turns.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    Role r;
    if (role == "system") {
      r = Role::System;
    } else if (role == "user") {
      r = Role::User;
    } else if (role == "assistant") {
      r = Role::Assistant;
    } else {
      fail(t, "message " + std::to_string(i) + " has role '" + role +
                  "', which is not supported (roles: system, user, assistant)");
    }
    conv.turns.push_back({r, &role, messages[i].content});
  }
  return conv;
}

// Templates that take an optional leading system message and then user/assistant/user/... turns.
struct Alternating {
  std::optional<std::string_view> system;
  std::span<const Turn> turns;  // after the system message; turns[i] is a user turn iff i is even
};

// `alternate_error` is the template's own raise_exception text.
Alternating split_alternating(const Conversation& conv, const char* alternate_error) {
  Alternating a;
  std::span<const Turn> all(conv.turns);
  if (all.front().role == Role::System) {
    a.system = all.front().content;
    all = all.subspan(1);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    const size_t index = i + (a.system ? 1 : 0);
    if (all[i].role == Role::System) {
      fail(conv.tmpl, "message " + std::to_string(index) +
                          " is a system message; this template accepts one only as the first message");
    }
    if ((all[i].role == Role::User) != (i % 2 == 0)) {
      fail(conv.tmpl, std::string(alternate_error) + " (message " + std::to_string(index) + " has role '" +
                          *all[i].role_text + "')");
    }
  }
  a.turns = all;
  return a;
}

constexpr const char* kAlternate = "Conversation roles must alternate user/assistant/user/assistant/...";
constexpr const char* kAlternateAfterSystem =
    "After the optional system message, conversation roles must alternate user/assistant/user/assistant/...";

void chatml(const Conversation& conv, bool agp, std::string_view default_system, RenderedChat& out) {
  if (!default_system.empty() && conv.turns.front().role != Role::System) {
    out += "<|im_start|>system\n";
    out += default_system;
    out += "<|im_end|>\n";
  }
  for (const Turn& m : conv.turns) {
    out += "<|im_start|>" + *m.role_text + "\n";
    out.add_content(m.content);
    out += "<|im_end|>\n";
  }
  if (agp) out += "<|im_start|>assistant\n";
}

void llama3_turn(const Turn& m, RenderedChat& out) {
  out += "<|start_header_id|>" + *m.role_text + "<|end_header_id|>\n\n";
  out.add_content(py_strip(m.content));
  out += "<|eot_id|>";
}

void llama3(const Conversation& conv, bool agp, std::string_view bos, RenderedChat& out) {
  out += bos;
  for (const Turn& m : conv.turns) llama3_turn(m, out);
  if (agp) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

void llama31(const Conversation& conv, bool agp, std::string_view bos, RenderedChat& out) {
  out += bos;
  out += "<|start_header_id|>system<|end_header_id|>\n\n";
  out += "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
  std::span<const Turn> rest(conv.turns);
  if (rest.front().role == Role::System) {
    out.add_content(py_strip(rest.front().content));
    rest = rest.subspan(1);
  }
  out += "<|eot_id|>";
  for (const Turn& m : rest) llama3_turn(m, out);
  if (agp) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

void llama2(const Conversation& conv, std::string_view bos, std::string_view eos, RenderedChat& out) {
  const Alternating a = split_alternating(conv, kAlternate);
  for (size_t i = 0; i < a.turns.size(); ++i) {
    std::string content;
    if (i == 0 && a.system) {
      content = "<<SYS>>\n" + std::string(*a.system) + "\n<</SYS>>\n\n";
    }
    content += a.turns[i].content;
    if (a.turns[i].role == Role::User) {
      out += bos;
      out += "[INST] ";
      out.add_content(py_strip(content));
      out += " [/INST]";
    } else {
      out += " ";
      out.add_content(py_strip(content));
      out += " ";
      out += eos;
    }
  }
}

void mistral_legacy(const Conversation& conv, std::string_view bos, std::string_view eos, RenderedChat& out) {
  const Alternating a = split_alternating(conv, kAlternate);
  out += bos;
  for (size_t i = 0; i < a.turns.size(); ++i) {
    if (a.turns[i].role == Role::User) {
      out += "[INST] ";
      if (i == 0 && a.system) {
        out.add_content(*a.system);
        out += "\n\n";
      }
      out.add_content(a.turns[i].content);
      out += " [/INST]";
    } else {
      out.add_content(a.turns[i].content);
      out += eos;
    }
  }
}

void mistral_v1(const Conversation& conv, std::string_view bos, std::string_view eos, RenderedChat& out) {
  const Alternating a = split_alternating(conv, kAlternateAfterSystem);
  out += bos;
  for (size_t i = 0; i < a.turns.size(); ++i) {
    if (a.turns[i].role == Role::User) {
      out += " [INST] ";
      if (i == 0 && a.system) {
        out.add_content(*a.system);
        out += "\n\n";
      }
      out.add_content(a.turns[i].content);
      out += " [/INST]";
    } else {
      out += " ";
      out.add_content(a.turns[i].content);
      out += eos;
    }
  }
}

// tekken: no space after [INST] or before the reply, and the reply is not trimmed.
void mistral_v3(const Conversation& conv, bool tekken, std::string_view bos, std::string_view eos,
                RenderedChat& out) {
  const Alternating a = split_alternating(conv, kAlternateAfterSystem);
  out += bos;
  for (size_t i = 0; i < a.turns.size(); ++i) {
    if (a.turns[i].role == Role::User) {
      out += tekken ? "[INST]" : "[INST] ";
      if (i + 1 == a.turns.size() && a.system) {
        out.add_content(*a.system);
        out += "\n\n";
      }
      out.add_content(a.turns[i].content);
      out += "[/INST]";
    } else {
      if (tekken) {
        out.add_content(a.turns[i].content);
      } else {
        out += " ";
        out.add_content(py_strip(a.turns[i].content));
      }
      out += eos;
    }
  }
}

void mistral_v7(const Conversation& conv, std::string_view bos, std::string_view eos, RenderedChat& out) {
  out += bos;
  for (const Turn& m : conv.turns) {
    if (m.role == Role::User) {
      out += "[INST] ";
      out.add_content(m.content);
      out += "[/INST]";
    } else if (m.role == Role::System) {
      out += "[SYSTEM_PROMPT] ";
      out.add_content(m.content);
      out += "[/SYSTEM_PROMPT]";
    } else {
      out += " ";
      out.add_content(m.content);
      out += eos;
    }
  }
}

void gemma(const Conversation& conv, bool agp, std::string_view bos, RenderedChat& out) {
  const Alternating a = split_alternating(conv, kAlternate);
  out += bos;
  for (size_t i = 0; i < a.turns.size(); ++i) {
    out += a.turns[i].role == Role::User ? "<start_of_turn>user\n" : "<start_of_turn>model\n";
    if (i == 0 && a.system) {
        out.add_content(*a.system);
        out += "\n\n";
      }
    out.add_content(py_strip(a.turns[i].content));
    out += "<end_of_turn>\n";
  }
  if (agp) out += "<start_of_turn>model\n";
}

void phi3(const Conversation& conv, bool agp, std::string_view eos, RenderedChat& out) {
  for (const Turn& m : conv.turns) {
    out += "<|" + *m.role_text + "|>\n";
    out.add_content(m.content);
    out += "<|end|>\n";
  }
  if (agp) {
    out += "<|assistant|>\n";
  } else {
    out += eos;
  }
}

void zephyr(const Conversation& conv, bool agp, std::string_view eos, RenderedChat& out) {
  for (const Turn& m : conv.turns) {
    out += "<|" + *m.role_text + "|>\n";
    out.add_content(m.content);
    out += eos;
    out += "\n";
  }
  if (agp) out += "<|assistant|>\n";
}

}  // namespace

RenderedChat render_chat_spans(ChatTemplate t, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                               std::string_view bos, std::string_view eos) {
  const Conversation conv = validate(t, messages);
  const bool agp = add_generation_prompt;
  RenderedChat out;
  switch (t) {
    case ChatTemplate::ChatML: chatml(conv, agp, "", out); break;
    case ChatTemplate::Qwen2: chatml(conv, agp, "You are a helpful assistant.", out); break;
    case ChatTemplate::Qwen25:
      chatml(conv, agp, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", out);
      break;
    case ChatTemplate::Llama2: llama2(conv, bos, eos, out); break;
    case ChatTemplate::Llama3: llama3(conv, agp, bos, out); break;
    case ChatTemplate::Llama31: llama31(conv, agp, bos, out); break;
    case ChatTemplate::MistralLegacy: mistral_legacy(conv, bos, eos, out); break;
    case ChatTemplate::MistralV1: mistral_v1(conv, bos, eos, out); break;
    case ChatTemplate::MistralV3: mistral_v3(conv, /*tekken=*/false, bos, eos, out); break;
    case ChatTemplate::MistralV3Tekken: mistral_v3(conv, /*tekken=*/true, bos, eos, out); break;
    case ChatTemplate::MistralV7: mistral_v7(conv, bos, eos, out); break;
    case ChatTemplate::Gemma: gemma(conv, agp, bos, out); break;
    case ChatTemplate::Phi3: phi3(conv, agp, eos, out); break;
    case ChatTemplate::Zephyr: zephyr(conv, agp, eos, out); break;
  }
  return out;
}

std::string render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        std::string_view bos, std::string_view eos) {
  return render_chat_spans(t, messages, add_generation_prompt, bos, eos).text;
}

}  // namespace preface::chat
