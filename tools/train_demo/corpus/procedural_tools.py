"""Procedural tool definitions: random but plausible names and JSON schemas built from
one split's vocabulary (vocab.py), with argument values and the request phrases that
mention them.

A tool is a verb and an entity in one of three name styles (``create_invoice``,
``createInvoice``, ``billing.invoices.create``) with 0-6 parameters of every JSON type:
string, integer, number, boolean, enum strings, ``from_X``/``to_X`` string pairs, arrays
of strings or integers, nested objects and arrays of objects; each parameter required or
optional. `ProcTool.draw_args` draws values, `ProcTool.request` phrases a request that
mentions every value, and `ProcTool.call_args` gives the call's arguments in schema order
with schema types (integers, numbers and booleans as JSON, strings raw).
"""

from __future__ import annotations

from functools import lru_cache

from . import values as V
from .vocab import (AFFIXES, BOOL_ATTRS, ENTITIES, ENUM_ATTRS, INT_ATTRS, LIST_ATTRS, NAMESPACES, NUM_ATTRS,
                    OBJECT_ATTRS, OBJECT_LIST_ATTRS, PAIR_ATTRS, STR_ATTRS, VERBS, is_heldout, split_words)

STYLES = ["snake", "snake", "camel", "dotted"]
N_PARAMS_W = [5, 15, 24, 24, 16, 10, 6]  # weights of 0..6 parameters


class Vocab:
    """One split's word lists. In training, each name word is a fresh pseudo-word with
    probability PSEUDO_P (see pick)."""

    def __init__(self, split):
        s = split
        self.pseudo_p = PSEUDO_P if split == "train" else 0.0
        self.verbs = split_words(s, VERBS, lambda e: e[0])
        self.entities = split_words(s, ENTITIES, lambda e: f"{e[0]}_{e[1]}")  # both forms are name words
        self.namespaces = split_words(s, NAMESPACES)
        self.str_attrs = split_words(s, STR_ATTRS, lambda e: e[0])
        self.int_attrs = split_words(s, INT_ATTRS)
        self.num_attrs = split_words(s, NUM_ATTRS)
        self.bool_attrs = split_words(s, BOOL_ATTRS)
        self.enum_attrs = split_words(s, ENUM_ATTRS, lambda e: e[0])
        self.pair_attrs = split_words(s, PAIR_ATTRS, lambda e: e[0])
        self.list_attrs = split_words(s, LIST_ATTRS, lambda e: e[0])
        self.object_attrs = split_words(s, OBJECT_ATTRS)
        self.object_list_attrs = split_words(s, OBJECT_LIST_ATTRS)


@lru_cache(maxsize=None)
def vocab(split):
    return Vocab(split)


PSEUDO_P = 0.5
_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gl", "kr", "pl", "st", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou"]
_CODAS = ["", "", "", "n", "r", "l", "s", "k", "m", "x"]


def pseudo_word(r):
    """A fresh pronounceable non-word (2-3 syllables) on the training side of the split rule.
    The BPE tokenizer cannot have merged it whole, so copying it from the tools block is the
    same skill as copying a held-out name, which the tokenizer also splits into pieces."""
    while True:
        w = "".join(r.choice(_ONSETS) + r.choice(_VOWELS) + r.choice(_CODAS) for _ in range(r.randint(2, 3)))
        if not is_heldout(w) and w not in AFFIXES:
            return w


def pick(r, v, entries, shape):
    """r.choice(entries), or with probability v.pseudo_p a pseudo-word entry of the same shape:
    "word", "verb" (word, past), "entity" (word, plural), "pool" (word, value pool),
    "plural_pool" (plural word, value pool), "enum" (word, values), "plural"."""
    if not v.pseudo_p or r.random() >= v.pseudo_p:
        return r.choice(entries)
    w = pseudo_word(r)
    if shape == "verb":
        return (w, w + "ed")
    if shape == "entity":
        return (w, w + "s")
    if shape == "pool":
        return (w, r.choice(entries)[1])
    if shape == "plural_pool":
        return (w + "s", r.choice(entries)[1])
    if shape == "enum":
        return (w, r.choice(entries)[1])
    return w + "s" if shape == "plural" else w


def ident(words, camel):
    """Join words as snake_case or camelCase."""
    if camel:
        return words[0] + "".join(w[:1].upper() + w[1:] for w in words[1:])
    return "_".join(words)


def article(word):
    return "an" if word[:1] in "aeiou" else "a"


# ----------------------------------------------------------------------------- parameters


class Param:
    """One parameter: name, words (for phrases), JSON schema, value generator."""

    def __init__(self, words, schema, gen, required, kind):
        self.words, self.schema, self.gen, self.required, self.kind = words, schema, gen, required, kind
        self.name = None  # set by the tool (snake or camel)


def _scalar(r, v, depth=0):
    """A string, integer, number, boolean or enum parameter (also used for object properties)."""
    kind = r.choices(["str", "int", "num", "bool", "enum"], [34, 20, 16, 14, 16])[0]
    if kind == "str" and v.str_attrs:
        attr, pool = pick(r, v, v.str_attrs, "pool")
        g = V.GEN[pool]
        return Param([attr], {"type": "string", "description": f"The {attr}"}, g, True, "str")
    if kind == "int" and v.int_attrs:
        attr = pick(r, v, v.int_attrs, "word")
        return Param([attr], {"type": "integer", "description": f"The {attr}"}, lambda r, a=attr: V.integer(r, a), True, "int")
    if kind == "num" and v.num_attrs:
        attr = pick(r, v, v.num_attrs, "word")
        return Param([attr], {"type": "number", "description": f"The {attr}"}, V.number, True, "num")
    if kind == "bool" and v.bool_attrs:
        attr = pick(r, v, v.bool_attrs, "word")
        words = [attr] if depth or r.random() < 0.6 else ["is", attr]
        return Param(words, {"type": "boolean", "description": f"Flag: {attr}"}, lambda r: r.random() < 0.5, True, "bool")
    attr, vals = pick(r, v, v.enum_attrs, "enum")
    return Param([attr], {"type": "string", "description": f"The {attr}", "enum": list(vals)},
                 lambda r, vals=vals: r.choice(vals), True, "enum")


def _param(r, v, entity, camel):
    """One top-level parameter (or a from/to pair: a list of two)."""
    ent, ents = entity
    kind = r.choices(["scalar", "id", "max", "include", "pair", "list", "ids", "object", "objects"],
                     [52, 10, 5, 4, 6, 8, 4, 7, 4])[0]
    if kind == "scalar":
        p = _scalar(r, v)
        if p.kind in ("str", "num", "enum") and r.random() < 0.25:
            p.words = [ent] + p.words
        return p
    if kind == "id":
        if r.random() < 0.6:
            return Param([ent, "id"], {"type": "integer", "description": f"Numeric id of the {ent}"},
                         lambda r: r.randint(1, 99999), True, "int")
        return Param([ent, "id"], {"type": "string", "description": f"Id of the {ent}"}, V.GEN["code"], True, "str")
    if kind == "max":
        return Param(["max", ents], {"type": "integer", "description": f"Maximum number of {ents}"},
                     lambda r: r.choice([3, 5, 10, 20, 50, 100]), True, "int")
    if kind == "include":
        return Param(["include", ents], {"type": "boolean", "description": f"Include related {ents}"},
                     lambda r: r.random() < 0.5, True, "bool")
    if kind == "pair" and v.pair_attrs:
        attr, pool = pick(r, v, v.pair_attrs, "pool")
        g = V.GEN[pool]

        def both(r, g=g):
            a = g(r)
            for _ in range(10):
                b = g(r)
                if b != a:
                    return a, b
            return a, b + "x"
        ps = [Param(["from", attr], {"type": "string", "description": f"Source {attr}"}, None, True, "pair_from"),
              Param(["to", attr], {"type": "string", "description": f"Target {attr}"}, None, True, "pair_to")]
        ps[0].pair_gen = both
        return ps
    if kind == "list" and v.list_attrs:
        attr, pool = pick(r, v, v.list_attrs, "plural_pool")
        g = V.GEN[pool]
        return Param([attr], {"type": "array", "description": f"List of {attr}", "items": {"type": "string"}},
                     lambda r, g=g: _distinct(r, g, r.randint(1, 3)), True, "list")
    if kind == "ids":
        return Param([ent, "ids"], {"type": "array", "description": f"Ids of the {ents}", "items": {"type": "integer"}},
                     lambda r: _distinct(r, lambda r: r.randint(1, 9999), r.randint(1, 4)), True, "list")
    if kind == "object" and v.object_attrs:
        attr = pick(r, v, v.object_attrs, "word")
        props = _props(r, v, camel)
        return Param([attr], _obj_schema(attr, props, r), lambda r, props=props: _obj_value(r, props), True, "object")
    if kind == "objects" and v.object_list_attrs:
        attr = pick(r, v, v.object_list_attrs, "plural")
        props = _props(r, v, camel)
        sch = {"type": "array", "description": f"List of {attr}", "items": _obj_schema(None, props, r)}
        return Param([attr], sch, lambda r, props=props: [_obj_value(r, props) for _ in range(r.randint(1, 3))],
                     True, "objects")
    return _scalar(r, v)


def _distinct(r, g, n):
    out = []
    for _ in range(n * 3):
        x = g(r)
        if x not in out:
            out.append(x)
        if len(out) == n:
            break
    return out


def _props(r, v, camel):
    props = []
    for _ in range(r.randint(2, 3)):
        p = _scalar(r, v, depth=1)
        p.name = ident(p.words, camel)
        if all(p.name != q.name for q in props):
            props.append(p)
    for p in props:
        p.required = r.random() < 0.7
    return props


def _obj_schema(attr, props, r):
    s = {"type": "object"}
    if attr:
        s["description"] = f"The {attr}"
    s["properties"] = {p.name: p.schema for p in props}
    req = [p.name for p in props if p.required]
    if req:
        s["required"] = req
    return s


def _obj_value(r, props):
    return {p.name: p.gen(r) for p in props if p.required or r.random() < 0.5}


# ----------------------------------------------------------------------------- tools


class ProcTool:
    """A procedural tool: name, description, parameters; schema() is the OpenAI format."""

    def __init__(self, verb, entity, style, ns, params, camel, dotted_plural=False):
        self.verb, self.past = verb
        self.entity, self.entities = entity
        self.style, self.ns, self.params, self.camel = style, ns, params, camel
        plural = self.verb in ("list", "search", "count", "export", "sync", "rank", "compare")
        self.obj = self.entities if plural else self.entity
        if style == "snake":
            self.name = f"{self.verb}_{self.obj}"
        elif style == "camel":
            self.name = ident([self.verb, self.obj], True)
        else:
            self.name = f"{ns}.{self.entities}.{self.verb}" if dotted_plural else f"{ns}.{self.verb}_{self.obj}"
        self.desc = f"{self.verb.capitalize()} {'' if plural else article(self.obj) + ' '}{self.obj}" + (f" in {ns}" if ns else "") + "."

    def key(self):
        return (self.verb, self.entity)

    def verb_pair(self):
        return (self.verb, self.past)

    def schema(self):
        props = {p.name: p.schema for p in self.params}
        req = [p.name for p in self.params if p.required]
        return {"type": "function", "function": {"name": self.name, "description": self.desc,
                                                 "parameters": {"type": "object", "properties": props, "required": req}}}

    def draw_args(self, r):
        """Values for every required and about half of the optional parameters, schema order."""
        args = {}
        for p in self.params:
            if p.kind == "pair_to":
                continue
            if not p.required and r.random() < 0.5:
                continue
            if p.kind == "pair_from":
                a, b = p.pair_gen(r)
                args[p.name] = a
                args[self.params[self.params.index(p) + 1].name] = b
            else:
                args[p.name] = p.gen(r)
        return args


def make_tool(r, v, verb=None, entity=None, style=None, ns=None, camel=None):
    """Draw one tool from vocabulary v; fixed parts may be given (for similar distractors)."""
    verb = verb or pick(r, v, v.verbs, "verb")
    entity = entity or pick(r, v, v.entities, "entity")
    style = style or r.choice(STYLES)
    if style == "dotted":
        ns = ns or pick(r, v, v.namespaces, "word")
    if camel is None:
        camel = style == "camel" and r.random() < 0.7
    n = r.choices(range(7), N_PARAMS_W)[0]
    params, names = [], set()
    for _ in range(n * 2):
        if len(params) >= n:
            break
        got = _param(r, v, entity, camel)
        got = got if isinstance(got, list) else [got]
        for p in got:
            p.name = ident(p.words, camel)
        if any(p.name in names for p in got) or len(params) + len(got) > 6:
            continue
        for p in got:
            names.add(p.name)
            p.required = r.random() < 0.6 if p.kind not in ("pair_from", "pair_to") else True
        params += got
    if params and not any(p.required for p in params) and r.random() < 0.7:
        params[0].required = True
    return ProcTool(verb, entity, style, ns if style == "dotted" else None, params, camel, r.random() < 0.5)


def similar_tools(r, v, target, k):
    """k distractors with names like the target's: same entity or verb, same style/namespace."""
    out, used = [], {target.name}
    for _ in range(k * 6):
        if len(out) >= k:
            break
        how = r.random()
        verb = target.verb_pair() if how < 0.45 else None
        ent = (target.entity, target.entities) if 0.45 <= how < 0.9 else None
        if verb is not None:  # same verb, another entity
            t = make_tool(r, v, verb=verb, style=target.style, ns=target.ns, camel=target.camel)
        elif ent is not None:  # same entity, another verb
            t = make_tool(r, v, entity=ent, style=target.style, ns=target.ns, camel=target.camel)
        else:
            t = make_tool(r, v)
        if t.name in used or t.key() == target.key():
            continue
        used.add(t.name)
        out.append(t)
    return out
