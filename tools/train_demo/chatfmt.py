"""Qwen3.5-style chat formatting shared by the demo-model tools.

`render()` is the Python twin of the Jinja chat template in
`models/demo/tokenizer_config.json` (see `CHAT_TEMPLATE` below). `check_template.py`
verifies that both render every corpus conversation byte-for-byte identically.

The format follows the Qwen3.5 / Qwen3-Coder conventions:

* tools are listed one JSON object per line inside ``<tools></tools>`` in the system
  turn, followed by the instructions and then the optional system text;
* assistant tool calls are XML: ``<tool_call>\\n<function=NAME>\\n<parameter=K>\\nV\\n
  </parameter>\\n</function>\\n</tool_call>``; strings are inserted raw, every other value
  as JSON;
* tool results become one ``user`` turn of ``<tool_response>`` blocks;
* assistant turns after the last real user query carry ``<think>\\n...\\n</think>\\n\\n``;
* the generation prompt is ``<|im_start|>assistant\\n<think>\\n`` or, with
  ``enable_thinking=False``, ``<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n``.
"""

from __future__ import annotations

import json
import re

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ENDOFTEXT = "<|endoftext|>"

SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]  # added, special=True
ADDED_TOKENS = [  # added, special=False (kept by decode(skip_special_tokens=True))
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
]

TOOLS_HEADER = "# Tools\n\nYou have access to the following functions:\n\n<tools>"
TOOLS_FOOTER = (
    "\n</tools>\n\n"
    "To call a function, reply with the following format and nothing after it:\n\n"
    "<tool_call>\n<function=function_name>\n<parameter=parameter_name>\nvalue\n</parameter>\n"
    "</function>\n</tool_call>\n\n"
    "Rules:\n"
    "- The function name must be one of the functions listed above\n"
    "- Give every required parameter; strings are written as plain text, other types as JSON\n"
    "- Short reasoning may come before a function call, never after it\n"
    "- If no function fits, answer directly without calling one"
)


def tojson(value) -> str:
    """Same as transformers' chat-template `tojson` filter (json.dumps defaults)."""
    return json.dumps(value, ensure_ascii=False)


def _content(msg) -> str:
    c = msg.get("content")
    return c if isinstance(c, str) else ""


def _last_query_index(messages) -> int:
    idx = len(messages) - 1
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m["role"] == "user":
            c = _content(m)
            if not (c.startswith("<tool_response>") and c.endswith("</tool_response>")):
                return i
    return idx


def render_tool_call(fn_name: str, arguments: dict) -> str:
    out = [f"<tool_call>\n<function={fn_name}>\n"]
    for k, v in arguments.items():
        out.append(f"<parameter={k}>\n")
        out.append(v if isinstance(v, str) else tojson(v))
        out.append("\n</parameter>\n")
    out.append("</function>\n</tool_call>")
    return "".join(out)


def render(messages, tools=None, add_generation_prompt=False, enable_thinking=True, spans=None) -> str:
    """Render like the Jinja template. If `spans` is a list, (start, end) character offsets
    of every assistant turn body (after ``<|im_start|>assistant\\n`` up to and including
    ``<|im_end|>``) that lies after the last user query are appended to it."""
    out: list[str] = []
    pos = 0

    def emit(s):
        nonlocal pos
        out.append(s)
        pos += len(s)

    if tools:
        sysmsg = ""
        if messages and messages[0]["role"] == "system":
            sysmsg = _content(messages[0]).strip()
        s = IM_START + "system\n" + TOOLS_HEADER
        for t in tools:
            s += "\n" + tojson(t)
        s += TOOLS_FOOTER
        if sysmsg:
            s += "\n\n" + sysmsg
        emit(s + IM_END + "\n")
    elif messages and messages[0]["role"] == "system":
        emit(IM_START + "system\n" + _content(messages[0]).strip() + IM_END + "\n")

    lq = _last_query_index(messages)
    n = len(messages)
    for i, m in enumerate(messages):
        role = m["role"]
        content = _content(m)
        if role == "system":
            if i != 0:
                emit(IM_START + "system\n" + content + IM_END + "\n")
        elif role == "user":
            emit(IM_START + "user\n" + content + IM_END + "\n")
        elif role == "assistant":
            rc = m.get("reasoning_content")
            if isinstance(rc, str):
                reasoning = rc
            elif "</think>" in content:
                reasoning = content.split("</think>")[0].split("<think>")[-1]
                content = content.split("</think>")[-1]
            else:
                reasoning = ""
            reasoning = reasoning.strip()
            content = content.strip()
            emit(IM_START + "assistant\n")
            start = pos
            if i > lq:
                body = "<think>\n" + reasoning + "\n</think>\n\n" + content
            else:
                body = content
            for j, tc in enumerate(m.get("tool_calls") or []):
                fn = tc.get("function", tc)
                if j == 0:
                    if content:
                        body += "\n\n"
                else:
                    body += "\n"
                args = fn.get("arguments")
                body += render_tool_call(fn["name"], args if isinstance(args, dict) else {})
            emit(body + IM_END)
            if spans is not None and i > lq:
                spans.append((start, pos))
            emit("\n")
        elif role == "tool":
            if i == 0 or messages[i - 1]["role"] != "tool":
                emit(IM_START + "user")
            emit("\n<tool_response>\n" + content.strip() + "\n</tool_response>")
            if i == n - 1 or messages[i + 1]["role"] != "tool":
                emit(IM_END + "\n")
        else:
            raise ValueError(f"unknown role {role}")
    if add_generation_prompt:
        emit(IM_START + "assistant\n")
        emit("<think>\n\n</think>\n\n" if enable_thinking is False else "<think>\n")
    return "".join(out)


def _j(s: str) -> str:
    """A Python string as a Jinja string literal."""
    return json.dumps(s)


# The Jinja chat template written for this project (Qwen3.5 layout, see module docstring).
CHAT_TEMPLATE = (
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' + " + _j(TOOLS_HEADER) + " }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- '\\n' }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- " + _j(TOOLS_FOOTER) + " }}\n"
    "    {%- if messages and messages[0].role == 'system' and messages[0].content is string %}\n"
    "        {%- set sys_text = messages[0].content | trim %}\n"
    "        {%- if sys_text %}\n"
    "            {{- '\\n\\n' + sys_text }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "    {{- '<|im_end|>\\n' }}\n"
    "{%- elif messages and messages[0].role == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + ((messages[0].content if messages[0].content is string else '') | trim) + '<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n"
    "{%- for message in messages[::-1] %}\n"
    "    {%- set index = (messages|length - 1) - loop.index0 %}\n"
    "    {%- if ns.multi_step_tool and message.role == 'user' %}\n"
    "        {%- set uc = message.content if message.content is string else '' %}\n"
    "        {%- if not (uc.startswith('<tool_response>') and uc.endswith('</tool_response>')) %}\n"
    "            {%- set ns.multi_step_tool = false %}\n"
    "            {%- set ns.last_query_index = index %}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- for message in messages %}\n"
    "    {%- set content = message.content if message.content is string else '' %}\n"
    "    {%- if message.role == 'system' %}\n"
    "        {%- if not loop.first %}\n"
    "            {{- '<|im_start|>system\\n' + content + '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- elif message.role == 'user' %}\n"
    "        {{- '<|im_start|>user\\n' + content + '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == 'assistant' %}\n"
    "        {%- set reasoning_content = '' %}\n"
    "        {%- if message.reasoning_content is string %}\n"
    "            {%- set reasoning_content = message.reasoning_content %}\n"
    "        {%- elif '</think>' in content %}\n"
    "            {%- set reasoning_content = content.split('</think>')[0].split('<think>')[-1] %}\n"
    "            {%- set content = content.split('</think>')[-1] %}\n"
    "        {%- endif %}\n"
    "        {%- set reasoning_content = reasoning_content | trim %}\n"
    "        {%- set content = content | trim %}\n"
    "        {%- if loop.index0 > ns.last_query_index %}\n"
    "            {{- '<|im_start|>assistant\\n<think>\\n' + reasoning_content + '\\n</think>\\n\\n' + content }}\n"
    "        {%- else %}\n"
    "            {{- '<|im_start|>assistant\\n' + content }}\n"
    "        {%- endif %}\n"
    "        {%- if message.tool_calls %}\n"
    "            {%- for tool_call in message.tool_calls %}\n"
    "                {%- if tool_call.function is defined %}\n"
    "                    {%- set tool_call = tool_call.function %}\n"
    "                {%- endif %}\n"
    "                {%- if loop.first %}\n"
    "                    {%- if content %}\n"
    "                        {{- '\\n\\n' }}\n"
    "                    {%- endif %}\n"
    "                {%- else %}\n"
    "                    {{- '\\n' }}\n"
    "                {%- endif %}\n"
    "                {{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}\n"
    "                {%- if tool_call.arguments is mapping %}\n"
    "                    {%- for args_name, args_value in tool_call.arguments | items %}\n"
    "                        {{- '<parameter=' + args_name + '>\\n' }}\n"
    "                        {%- if args_value is string %}\n"
    "                            {{- args_value }}\n"
    "                        {%- else %}\n"
    "                            {{- args_value | tojson }}\n"
    "                        {%- endif %}\n"
    "                        {{- '\\n</parameter>\\n' }}\n"
    "                    {%- endfor %}\n"
    "                {%- endif %}\n"
    "                {{- '</function>\\n</tool_call>' }}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == 'tool' %}\n"
    "        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' + (content | trim) + '\\n</tool_response>' }}\n"
    "        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<think>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
)


# ---------------------------------------------------------------------------- parsing

_TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_FUNC_RE = re.compile(r"^\s*<function=([^>\n]+)>(.*?)</function>\s*$", re.S)
_PARAM_RE = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.S)


def parse_tool_calls(text: str):
    """Parse Qwen3.5 XML tool calls from generated assistant text.

    Returns (calls, ok): calls = [{"name", "raw_args": {k: str}}]; ok is False when a
    ``<tool_call>`` block is present but malformed (unclosed or wrong inner structure).
    Parameter values lose one leading and one trailing newline, like vLLM's
    qwen3_coder parser."""
    calls = []
    ok = True
    if text.count("<tool_call>") != text.count("</tool_call>"):
        ok = False
    for block in _TOOL_CALL_RE.findall(text):
        m = _FUNC_RE.match(block)
        if not m:
            ok = False
            continue
        name, inner = m.group(1).strip(), m.group(2)
        args = {}
        rest = _PARAM_RE.sub("", inner)
        if rest.strip():
            ok = False
        for k, v in _PARAM_RE.findall(inner):
            if v.startswith("\n"):
                v = v[1:]
            if v.endswith("\n"):
                v = v[:-1]
            args[k.strip()] = v
        calls.append({"name": name, "raw_args": args})
    return calls, ok


def convert_value(raw: str, schema: dict):
    """Convert a raw parameter string by its JSON schema. Returns (value, valid)."""
    t = schema.get("type", "string")
    try:
        if t == "string":
            v = raw
        elif t == "integer":
            if not re.fullmatch(r"-?\d+", raw.strip()):
                return raw, False
            v = int(raw.strip())
        elif t == "number":
            if not re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", raw.strip()):
                return raw, False
            v = float(raw.strip())
            if v.is_integer() and "." not in raw and "e" not in raw.lower():
                v = int(v)
        elif t == "boolean":
            s = raw.strip()
            if s not in ("true", "false"):
                return raw, False
            v = s == "true"
        elif t in ("array", "object"):
            v = json.loads(raw)
            if t == "array" and not isinstance(v, list):
                return raw, False
            if t == "object" and not isinstance(v, dict):
                return raw, False
        else:
            v = raw
    except (ValueError, json.JSONDecodeError):
        return raw, False
    return v, _valid(v, schema)


def _valid(v, schema) -> bool:
    t = schema.get("type", "string")
    if "enum" in schema and v not in schema["enum"]:
        return False
    if t == "string":
        return isinstance(v, str)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "array":
        if not isinstance(v, list):
            return False
        it = schema.get("items")
        return all(_valid(x, it) for x in v) if it else True
    if t == "object":
        if not isinstance(v, dict):
            return False
        props = schema.get("properties")
        if props:
            for k, x in v.items():
                if k not in props or not _valid(x, props[k]):
                    return False
            for k in schema.get("required", []):
                if k not in v:
                    return False
        return True
    return True
