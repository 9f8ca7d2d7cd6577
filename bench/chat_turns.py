#!/usr/bin/env python3
"""A multi-turn chat against an OpenAI-compatible server, timed per turn (the benchmark of docs/performance.md's
"Hybrid chat" section). Standard library only.

Each turn sends the whole conversation (a long system prompt, then user/assistant pairs) to /v1/chat/completions
with stream: true, temperature 0 and ignore_eos, and records the time to the first content chunk (TTFT), the decode
rate after it, and the cached prompt tokens the server reports (OpenAI's usage.prompt_tokens_details.cached_tokens,
or llama.cpp's timings.cache_n). The assistant's reply text is sent back in the next turn as it came.

usage: chat_turns.py URL [--turns 30] [--system-words 1600] [--user-words 38] [--max-tokens 50] [--label NAME]
Prints one line per turn and a summary; --json FILE writes the per-turn records.
"""
import argparse
import http.client
import json
import sys
import time
import urllib.parse

WORDS = ("the river carried small boats past the old mill while children counted birds on the bridge and a baker "
         "sold warm bread to travellers who had walked since dawn across the valley toward the market town where "
         "merchants argued about the price of wool salt copper lamps and painted cups").split()


def text(n_words, seed):
    out = []
    x = seed * 2654435761 % 2**32
    for _ in range(n_words):
        x = (x * 1103515245 + 12345) % 2**31
        out.append(WORDS[x % len(WORDS)])
    return " ".join(out).capitalize() + "."


def turn(url, path, body):
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)  # one per turn: some servers close it
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
    t_first = None
    pieces, usage, timings, n_chunks = [], None, None, 0
    buf = b""
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        ev = json.loads(data)
        usage = ev.get("usage") or usage
        timings = ev.get("timings") or timings
        for ch in ev.get("choices", []):
            piece = (ch.get("delta") or {}).get("content")
            if piece:
                if t_first is None:
                    t_first = time.perf_counter()
                pieces.append(piece)
                n_chunks += 1
    t_end = time.perf_counter()
    resp.read()
    conn.close()
    return "".join(pieces), t0, t_first or t_end, t_end, usage, timings, n_chunks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--system-words", type=int, default=1600)
    ap.add_argument("--user-words", type=int, default=38)
    ap.add_argument("--max-tokens", type=int, default=50)
    ap.add_argument("--label", default="")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    messages = [{"role": "system", "content": "You answer questions about the valley. " + text(a.system_words, 1)}]
    records = []
    for i in range(a.turns):
        messages.append({"role": "user", "content": text(a.user_words, 100 + i)})
        body = {"model": "m", "messages": messages, "max_tokens": a.max_tokens, "temperature": 0, "stream": True,
                "ignore_eos": True, "stream_options": {"include_usage": True}, "cache_prompt": True}
        reply, t0, t1, t2, usage, timings, n_chunks = turn(u, "/v1/chat/completions", body)
        messages.append({"role": "assistant", "content": reply})
        prompt_tokens = cached = None
        if usage:
            prompt_tokens = usage.get("prompt_tokens")
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        if timings and cached is None:
            cached = timings.get("cache_n")
        if timings and prompt_tokens is None and "prompt_n" in timings:
            prompt_tokens = timings["prompt_n"] + (timings.get("cache_n") or 0)
        n_out = (usage or {}).get("completion_tokens") or (timings or {}).get("predicted_n") or n_chunks
        rec = {"turn": i + 1, "ttft_ms": (t1 - t0) * 1e3, "total_ms": (t2 - t0) * 1e3, "prompt_tokens": prompt_tokens,
               "cached_tokens": cached, "completion_tokens": n_out,
               "decode_tok_s": (n_out - 1) / (t2 - t1) if n_out and n_out > 1 and t2 > t1 else None}
        if prompt_tokens is not None and cached is not None:
            rec["prefill_tok_s"] = (prompt_tokens - cached) / max(t1 - t0, 1e-9)
        records.append(rec)
        print(f"{a.label} turn {i + 1:2d}: prompt {prompt_tokens} cached {cached} ttft {rec['ttft_ms']:.0f} ms "
              f"decode {rec['decode_tok_s'] or 0:.1f} tok/s", flush=True)
    def median(xs):
        xs = sorted(x for x in xs if x is not None)
        return xs[len(xs) // 2] if xs else None
    later = records[1:]
    print(f"{a.label} summary: first-turn ttft {records[0]['ttft_ms']:.0f} ms; turns 2-{a.turns} median ttft "
          f"{median(r['ttft_ms'] for r in later):.0f} ms, last {records[-1]['ttft_ms']:.0f} ms; median decode "
          f"{median(r['decode_tok_s'] for r in records):.1f} tok/s; first-turn prefill "
          f"{records[0].get('prefill_tok_s') or 0:.0f} tok/s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(records, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
