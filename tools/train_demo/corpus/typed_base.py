"""Hand-written typed tools: the parameter and tool classes and the registry."""

from __future__ import annotations

# ----------------------------------------------------------------------------- tools


class P:
    """One parameter. `aliases` are alternative names drawn per conversation."""

    def __init__(self, name, type_, desc, required=True, enum=None, items=None, properties=None,
                 prop_required=None, aliases=()):
        self.name, self.type, self.desc, self.required = name, type_, desc, required
        self.enum, self.items, self.properties, self.prop_required = enum, items, properties, prop_required
        self.aliases = tuple(aliases) or (name,)

    def schema(self):
        s = {"type": self.type, "description": self.desc}
        if self.enum:
            s["enum"] = list(self.enum)
        if self.items:
            s["items"] = self.items
        if self.properties:
            s["properties"] = self.properties
            if self.prop_required:
                s["required"] = list(self.prop_required)
        return s


class Tool:
    """An invented function. gen(r) -> (request, canonical args, summary); result(args, r) -> dict;
    answer(args, res) -> str."""

    def __init__(self, key, names, desc, params, gen, result, answer):
        self.key, self.names, self.desc = key, names, desc
        self.params, self.gen, self.result, self.answer = params, gen, result, answer

    def instantiate(self, r, split):
        """Choose a name and parameter aliases; return (schema, name, param-name map).

        Mostly the canonical (first) name and parameter names: a model of this size,
        trained for under an hour, learns request -> function reliably only for names it
        has seen often. Aliases keep it reading the schema. Both splits draw from the same
        names: tools never seen in training are the procedural held-out ones (procedural.py)."""
        name = self.names[0] if r.random() < CANONICAL_P else r.choice(self.names)
        pmap = {p.name: p.aliases[0] if r.random() < CANONICAL_P else r.choice(p.aliases) for p in self.params}
        props = {pmap[p.name]: p.schema() for p in self.params}
        req = [pmap[p.name] for p in self.params if p.required]
        schema = {"type": "function", "function": {"name": name, "description": self.desc,
                                                   "parameters": {"type": "object", "properties": props,
                                                                  "required": req}}}
        return schema, name, pmap

    def call_args(self, args, pmap):
        return {pmap[p.name]: args[p.name] for p in self.params if p.name in args}


def ask(r, bases, extras=(), end="?"):
    """Join a request base with optional phrases."""
    return r.choice(bases) + "".join(extras) + end


TOOLS: list[Tool] = []
CANONICAL_P = 0.85  # share of tool/parameter names that are the canonical ones


def tool(**kw):
    TOOLS.append(Tool(**kw))
