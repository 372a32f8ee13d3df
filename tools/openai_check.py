#!/usr/bin/env python3
"""Drive a running `edge-llm serve` with the official `openai` client (not run in CI).

    cargo run --release -p edge-cli -- serve --port 8000 &
    pip install openai
    python3 tools/openai_check.py --base-url http://127.0.0.1:8000/v1
"""
import argparse
import json

from openai import OpenAI

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a bash command in the repository shell and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The bash command to run"}},
            "required": ["command"],
        },
    },
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--model", default="demo")
    a = ap.parse_args()
    client = OpenAI(base_url=a.base_url, api_key="unused")
    print("models:", [m.id for m in client.models.list().data])

    messages = [
        {"role": "system", "content": "You are a helpful coding assistant with shell access."},
        {"role": "user", "content": "Show me the recent git history."},
    ]
    r = client.chat.completions.create(
        model=a.model, messages=messages, tools=[BASH], max_tokens=40, temperature=0
    )
    msg = r.choices[0].message
    print("finish:", r.choices[0].finish_reason, "usage:", r.usage)
    print("content:", repr(msg.content), "tool_calls:", msg.tool_calls)

    if msg.tool_calls:
        call = msg.tool_calls[0]
        print("arguments:", json.loads(call.function.arguments))
        messages.append(msg.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "a1b2c3 Fix the parser"})
        r = client.chat.completions.create(
            model=a.model, messages=messages, tools=[BASH], max_tokens=40, temperature=0
        )
        print("follow-up:", r.choices[0].message, "cached:", r.usage.prompt_tokens_details)

    stream = client.chat.completions.create(
        model=a.model,
        messages=[{"role": "user", "content": "Hello!"}],
        max_tokens=20,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    text = ""
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.usage:
            print("stream usage:", chunk.usage)
    print("streamed:", repr(text))

    # Log-probabilities, as the client parses them: chat (whole and streamed) and text
    # completions.
    ask = dict(model=a.model, messages=[{"role": "user", "content": "Hello!"}], max_tokens=8,
               temperature=0, logprobs=True, top_logprobs=3)
    r = client.chat.completions.create(**ask)
    entries = r.choices[0].logprobs.content
    assert entries and all(len(e.top_logprobs) == 3 and e.logprob <= 0 for e in entries), entries
    assert all(abs(e.top_logprobs[0].logprob - e.logprob) < 1e-5 for e in entries), "greedy"
    print("chat logprobs:", [(e.token, round(e.logprob, 3)) for e in entries])
    streamed = []
    for chunk in client.chat.completions.create(**ask, stream=True):
        if chunk.choices and chunk.choices[0].logprobs and chunk.choices[0].logprobs.content:
            streamed += chunk.choices[0].logprobs.content
    assert [e.token for e in streamed] == [e.token for e in entries], (streamed, entries)
    c = client.completions.create(model=a.model, prompt="def main():", max_tokens=6,
                                  temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    assert "".join(lp.tokens) == c.choices[0].text, lp
    print("completion logprobs:", list(zip(lp.tokens, lp.token_logprobs)))
    print("all checks passed")


if __name__ == "__main__":
    main()
