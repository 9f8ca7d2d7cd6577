// The string formats a JSON Schema `format` keyword names, as GBNF over a JSON string's content. Internal to
// json_schema.cpp. Each grammar writes a subset of the format's valid values, chosen to satisfy the common
// validators too (zod 4's email regex, `new URL()` for uri, RFC 3339 for date-time): e.g. emails are dot-atoms at
// an alphabetic top-level domain, URIs are http(s) URLs, IPv6 addresses are the full eight-group form.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace preface::grammar {

// The GBNF expression of `format`'s values (without the quotes), or nullopt for a format not known here.
std::optional<std::string> string_format_gbnf(std::string_view format);

// The formats string_format_gbnf knows, comma-separated (for messages).
const char* known_string_formats();

}  // namespace preface::grammar
