// The chat page served at GET / (assets/chat.html, compiled in by CMake through chat_page.cpp.in): one HTML
// document with its CSS and JavaScript inline, talking to the served model through /v1/chat/completions
// (streamed) and showing under each reply its prompt tokens, those read from the prefix cache and those written
// to it, and the time to the first token. The page is static and open; it sends the key of its key field (or of
// /#key=KEY, moved to sessionStorage and out of the address bar) as `Authorization: Bearer`.
//
// Test hooks: /#say=A|B sends A, then B (#max=N: N tokens a reply at most; #stream=0: whole replies, not streamed); <body> then carries data-ready="1", data-replies (replies received),
// data-cached, data-written and data-ttft (of the last reply) and data-error (the last failure, "" when none).
#pragma once
#include <string_view>

namespace preface::server {

extern const std::string_view kChatHtml;

}  // namespace preface::server
