"""Conversations over the hand-written typed tools (single, parallel, sequential, no-fit, chat)."""

from __future__ import annotations

import json

from . import typed_catalog_a, typed_catalog_b  # noqa: F401  (register the tools, in order)
from .pools import GENERAL_QA, SYSTEM_PROMPTS, THANKS
from .typed_base import TOOLS


# ----------------------------------------------------------------------------- typed tools


def train_pool(split):
    """The hand-written tools (the same in both splits)."""
    return TOOLS


def typed_conversation(r, split):
    think = r.random() < 0.5
    pool = train_pool(split)
    n_seg = 1 if r.random() < 0.85 else 2
    kinds = [r.choices(["single", "parallel", "sequential", "irrelevant", "chat"], [60, 10, 10, 10, 10])[0] for _ in range(n_seg)]
    if n_seg == 2 and kinds[0] in ("chat",) and r.random() < 0.5:
        kinds.reverse()

    needed = []  # tools that must be listed
    missing = []  # tools used for "irrelevant" requests (must not be listed)
    for k in kinds:
        if k == "single":
            needed.append([r.choice(pool)])
        elif k in ("parallel", "sequential"):
            t1 = r.choice(pool)
            t2 = r.choice([t for t in pool if t.key != t1.key]) if r.random() < 0.6 else t1
            needed.append([t1, t2])
        elif k == "irrelevant":
            missing.append(r.choice(pool))
            needed.append([])
        else:
            needed.append([])
    listed = {}
    for grp in needed:
        for t in grp:
            listed[t.key] = t
    miss_keys = {t.key for t in missing}
    if any(k in miss_keys for k in listed):  # conflict: irrelevant tool would be listed
        return None
    n_extra = r.randint(0, 3) if listed else r.randint(1, 3)
    others = [t for t in pool if t.key not in listed and t.key not in miss_keys]
    for t in r.sample(others, min(n_extra, len(others))):
        listed[t.key] = t
    order = list(listed.values())
    r.shuffle(order)
    inst = {}
    tools = []
    used_names = set()
    for t in order:
        for _ in range(10):
            schema, name, pmap = t.instantiate(r, split)
            if name not in used_names:
                break
        used_names.add(name)
        inst[t.key] = (name, pmap)
        tools.append(schema)

    messages = []
    if r.random() < 0.5:
        messages.append({"role": "system", "content": r.choice(SYSTEM_PROMPTS)})

    def call(t, args):
        name, pmap = inst[t.key]
        return {"type": "function", "function": {"name": name, "arguments": t.call_args(args, pmap)}}

    for si, (k, grp) in enumerate(zip(kinds, needed)):
        last = si == len(kinds) - 1
        rz = (lambda s: s) if (think and last) else (lambda s: "")
        pre = ""
        if k == "single":
            t = grp[0]
            req, args, summ = t.gen(r)
            name = inst[t.key][0]
            messages.append({"role": "user", "content": req})
            if r.random() < 0.1:
                pre = r.choice(["Let me check that.", "Sure, one moment.", "I will look that up."])
            messages.append({"role": "assistant", "content": pre, "tool_calls": [call(t, args)],
                             "reasoning_content": rz(f"The user asks about {summ}. The {name} function handles this, so I will call it.")})
            res = t.result(args, r)
            messages.append({"role": "tool", "content": json.dumps(res)})
            messages.append({"role": "assistant", "content": t.answer(args, res),
                             "reasoning_content": rz(f"{name} returned the result. I can answer now.")})
        elif k in ("parallel", "sequential"):
            t1, t2 = grp
            q1, a1, s1 = t1.gen(r)
            q2, a2, s2 = t2.gen(r)
            if a1 == a2:
                return None
            q2l = q2[0].lower() + q2[1:]
            messages.append({"role": "user", "content": f"{q1} {r.choice(['Also,', 'And', 'Then'])} {q2l}"})
            n1, n2 = inst[t1.key][0], inst[t2.key][0]
            res1, res2 = t1.result(a1, r), t2.result(a2, r)
            if k == "parallel":
                messages.append({"role": "assistant", "content": "", "tool_calls": [call(t1, a1), call(t2, a2)],
                                 "reasoning_content": rz(f"There are two independent requests: {s1} and {s2}. I will call {n1} and {n2} together.")})
                messages.append({"role": "tool", "content": json.dumps(res1)})
                messages.append({"role": "tool", "content": json.dumps(res2)})
                messages.append({"role": "assistant", "content": t1.answer(a1, res1) + " " + t2.answer(a2, res2),
                                 "reasoning_content": rz("Both calls returned. I can answer both parts.")})
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call(t1, a1)],
                                 "reasoning_content": rz(f"There are two requests. First {s1}, so I call {n1}.")})
                messages.append({"role": "tool", "content": json.dumps(res1)})
                messages.append({"role": "assistant", "content": "", "tool_calls": [call(t2, a2)],
                                 "reasoning_content": rz(f"Now the second part, {s2}: I call {n2}.")})
                messages.append({"role": "tool", "content": json.dumps(res2)})
                messages.append({"role": "assistant", "content": t1.answer(a1, res1) + " " + t2.answer(a2, res2),
                                 "reasoning_content": rz("I have both results and can answer.")})
        elif k == "irrelevant":
            t = missing.pop(0)
            req, args, summ = t.gen(r)
            messages.append({"role": "user", "content": req})
            messages.append({"role": "assistant", "content": r.choice([
                f"Sorry, I cannot help with {summ}: none of my available tools supports it.",
                f"I do not have a tool for {summ}, so I cannot do that right now.",
                f"None of the available functions can handle {summ}."]),
                "reasoning_content": rz(f"The user asks about {summ}, but no listed function does that. I should say so instead of calling a tool.")})
        else:  # chat
            if si > 0 and r.random() < 0.6:
                q, a = r.choice(THANKS)
            else:
                q, a = r.choice(GENERAL_QA)
            messages.append({"role": "user", "content": q})
            messages.append({"role": "assistant", "content": a,
                             "reasoning_content": rz("This does not need any tool; I can answer directly.")})
    return {"kind": "typed_" + "+".join(kinds), "tools": tools, "messages": messages, "enable_thinking": think}
