"""Conversations over procedural tools (procedural_tools.py): 1-8 tools per request,
the right one anywhere in the list among distractors with similar names.

Kinds: ``single`` (call, result, answer), ``parallel`` (two calls in one turn),
``followup`` (a second request, answered with a second tool), ``nofit`` (tools are
offered but none does what is asked: answer without a call) and ``chat`` (a general
question with tools offered: answer directly). The held-out split draws every tool,
target and distractor, from the held-out vocabulary.

``distractor_conversation`` is the hard variant (the ``distract`` family of gen_corpus.py,
training only): 3-8 tools whose distractors (all but a random tenth) share the target's
verb or entity, so the right tool must be told from the request's verb *and* object, the
choice the model gets wrong most often on held-out tools.
"""

from __future__ import annotations

import json

from . import phrasing as ph
from .pools import GENERAL_QA, SYSTEM_PROMPTS, THANKS
from .procedural_tools import make_tool, similar_tools, vocab

KINDS = ["single", "parallel", "followup", "nofit", "chat"]
KIND_W = [58, 8, 12, 12, 10]
N_TOOLS_W = [20, 20, 18, 14, 10, 8, 5, 5]  # weights of 1..8 tools per request
HARD_KIND_W = [62, 10, 16, 12, 0]  # no chat turns: they offer nothing to choose between
HARD_N_TOOLS_W = [0, 0, 16, 18, 18, 16, 16, 16]  # 3..8 tools: always something to confuse
MAX_TOOLS_CHARS = 3200  # drop distractors beyond this much tool JSON (bounds a conversation's tools block)


def _call(tool, args):
    return {"type": "function", "function": {"name": tool.name, "arguments": args}}


def _tool_list(r, v, targets, n_tools, nofit=None, hard=False):
    """targets plus distractors (half with similar names, all when `hard`), targets at
    random positions."""
    anchor = nofit or targets[0]
    k = max(0, n_tools - len(targets))
    n_sim = k if hard else (k + 1) // 2 if r.random() < 0.8 else 0
    tools = similar_tools(r, v, anchor, n_sim)
    taken = {t.name for t in tools + targets} | ({nofit.name} if nofit else set())
    keys = {t.key() for t in targets} | ({nofit.key()} if nofit else set())
    for _ in range(k * 4):
        if len(tools) >= k:
            break
        t = make_tool(r, v, style=anchor.style if r.random() < 0.7 else None,
                      ns=anchor.ns if r.random() < 0.6 else None)
        if t.name not in taken and t.key() not in keys:
            taken.add(t.name)
            tools.append(t)
    tools = [t for t in tools if t.key() not in keys]
    while tools and len(json.dumps([t.schema() for t in tools + targets])) > MAX_TOOLS_CHARS:
        tools.pop()
    for t in targets:
        tools.insert(r.randint(0, len(tools)), t)
    return tools


def distractor_conversation(r, split):
    """A conversation whose distractors nearly all have names like the target's."""
    return proc_conversation(r, split, hard=True)


def proc_conversation(r, split, hard=False):
    """One conversation; returns None when a draw is unusable (the caller redraws)."""
    v = vocab(split)
    think = r.random() < 0.5
    kind = r.choices(KINDS, HARD_KIND_W if hard else KIND_W)[0]
    n_tools = r.choices(range(1, 9), HARD_N_TOOLS_W if hard else N_TOOLS_W)[0]
    first = make_tool(r, v)
    targets, nofit = [first], None
    if kind in ("parallel", "followup"):
        second = make_tool(r, v, style=first.style, ns=first.ns)
        if second.name == first.name or second.key() == first.key():
            return None
        targets.append(second)
        n_tools = max(n_tools, 2)
    if kind == "nofit":
        nofit, targets = first, []
    tools = _tool_list(r, v, targets, n_tools, nofit, hard)
    if not tools:
        return None
    rz = (lambda s: s) if think else (lambda s: "")
    messages = []
    if r.random() < 0.5:
        messages.append({"role": "system", "content": r.choice(SYSTEM_PROMPTS)})

    def exchange(tool, last):
        args = tool.draw_args(r)
        messages.append({"role": "user", "content": ph.request(tool, args, r)})
        z = rz if last else (lambda s: "")
        messages.append({"role": "assistant", "content": "", "tool_calls": [_call(tool, args)],
                         "reasoning_content": z(ph.reasoning_call(tool, args))})
        res = ph.result(tool, args, r)
        messages.append({"role": "tool", "content": json.dumps(res)})
        messages.append({"role": "assistant", "content": ph.answer(tool, args, res, r),
                         "reasoning_content": z(f"{tool.name} returned. I can answer now.")})

    if kind == "single":
        exchange(first, True)
    elif kind == "followup":
        exchange(first, False)
        exchange(targets[1], True)
    elif kind == "parallel":
        t1, t2 = targets
        a1, a2 = t1.draw_args(r), t2.draw_args(r)
        q2 = ph.request(t2, a2, r)
        messages.append({"role": "user", "content": f"{ph.request(t1, a1, r)} {r.choice(['Also:', 'And:', 'Then:'])} {q2}"})
        messages.append({"role": "assistant", "content": "", "tool_calls": [_call(t1, a1), _call(t2, a2)],
                         "reasoning_content": rz(f"Two independent requests: {t1.name} and {t2.name}. I will call both.")})
        res1, res2 = ph.result(t1, a1, r), ph.result(t2, a2, r)
        messages.append({"role": "tool", "content": json.dumps(res1)})
        messages.append({"role": "tool", "content": json.dumps(res2)})
        messages.append({"role": "assistant", "content": ph.answer(t1, a1, res1, r) + " " + ph.answer(t2, a2, res2, r),
                         "reasoning_content": rz("Both calls returned. I can answer both parts.")})
    elif kind == "nofit":
        args = nofit.draw_args(r)
        messages.append({"role": "user", "content": ph.request(nofit, args, r)})
        messages.append({"role": "assistant", "content": ph.nofit_answer(nofit, r),
                         "reasoning_content": rz(ph.reasoning_nofit(nofit))})
    else:  # chat
        q, a = r.choice(GENERAL_QA if r.random() < 0.8 else THANKS)
        messages.append({"role": "user", "content": q})
        messages.append({"role": "assistant", "content": a,
                         "reasoning_content": rz("This does not need any tool; I can answer directly.")})
    return {"kind": f"{'distract' if hard else 'proc'}_{kind}", "tools": [t.schema() for t in tools], "messages": messages,
            "enable_thinking": think}
