#include "grammar/schema_formats.h"

#include <map>

namespace preface::grammar {
namespace {

// Hostname labels of 1-62 characters, at most four of them (at most 251 characters in all: under the 253 limit).
constexpr const char* kLabel = R"(( [A-Za-z0-9] ( [A-Za-z0-9-]{0,60} [A-Za-z0-9] )? ))";
constexpr const char* kOctet = R"(( "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9] ))";
constexpr const char* kDate = R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))";
constexpr const char* kTime = R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? )"
                              R"(( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))";
// URL path, query and fragment characters (RFC 3986 pchar and "/" "?"), a percent sign only as %XX.
constexpr const char* kUrlChar = R"(( [A-Za-z0-9._~!$&'()*+,;=:@/-] | "%" [0-9A-Fa-f]{2} ))";

std::string hostname() { return std::string(kLabel) + " ( \".\" " + kLabel + " ){0,3}"; }

const std::map<std::string, std::string, std::less<>>& formats() {
  static const std::map<std::string, std::string, std::less<>> k = [] {
    std::map<std::string, std::string, std::less<>> m;
    m["date"] = kDate;
    m["time"] = kTime;
    m["date-time"] = std::string("( ") + kDate + " ) \"T\" ( " + kTime + " )";
    m["uuid"] = R"([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})";
    m["hostname"] = hostname();
    m["ipv4"] = std::string(kOctet) + " ( \".\" " + kOctet + " ){3}";
    m["ipv6"] = R"([0-9a-f]{1,4} ( ":" [0-9a-f]{1,4} ){7})";
    // local part: dot-atoms of 1-15 characters, at most 4 (under the 64 limit); domain: 1-3 labels and a TLD.
    m["email"] = R"([A-Za-z0-9_+-]{1,15} ( "." [A-Za-z0-9_+-]{1,15} ){0,3} "@" )" + std::string(kLabel) +
                 " ( \".\" " + kLabel + R"( ){0,2} "." [A-Za-z]{2,16})";
    const std::string url = "\"http\" \"s\"? \"://\" ( " + hostname() + " ) ( \":\" [1-9] [0-9]{0,3} )? ( \"/\" " +
                            kUrlChar + "* )? ( \"?\" " + kUrlChar + "* )? ( \"#\" " + kUrlChar + "* )?";
    m["uri"] = url;
    m["url"] = url;
    m["uri-reference"] = url;
    m["iri"] = url;
    return m;
  }();
  return k;
}

}  // namespace

std::optional<std::string> string_format_gbnf(std::string_view format) {
  const auto it = formats().find(format);
  if (it == formats().end()) return std::nullopt;
  return it->second;
}

const char* known_string_formats() {
  return "date, time, date-time, uuid, hostname, ipv4, ipv6, email, uri, url, uri-reference, iri";
}

}  // namespace preface::grammar
