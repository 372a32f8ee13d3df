"""User requests, reasoning and answers for procedural tools: every argument value is
mentioned next to the spoken words of its parameter name."""

from __future__ import annotations

from .procedural_tools import article

SPOKEN_VERB = {"lookup": "look up", "backup": "back up", "rollback": "roll back", "get": "get", "sync": "sync"}


def verb_text(verb):
    return SPOKEN_VERB.get(verb, verb)


def join_and(parts):
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def value_text(p, v, r):
    """How a value is written in a request."""
    if p.kind == "objects":
        return "; ".join(f"({_object_text(p.schema['items'], x, r)})" for x in v)
    if p.kind == "object":
        return f"({_object_text(p.schema, v, r)})"
    if isinstance(v, list):
        return f"({', '.join(str(x) for x in v)})" if len(v) > 1 else str(v[0])
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str) and " " in v and r.random() < 0.4:
        return f"\"{v}\""
    return str(v)


def _words(name):
    from .vocab import words_of

    return " ".join(words_of(name))


def _object_text(schema, v, r):
    parts = []
    for k, x in v.items():
        ps = schema["properties"][k]
        if ps["type"] == "boolean":
            parts.append(f"{_words(k)} {'yes' if x else 'no'}")
        else:
            parts.append(f"{_words(k)} {x}")
    return ", ".join(parts)


def param_phrase(p, v, r, pair_to=None):
    """One argument as a phrase ("max invoices 5", "draft: yes", "from EUR to JPY")."""
    w = " ".join(p.words)
    if p.kind == "pair_from":
        attr = p.words[1]
        return r.choice([f"from {v} to {pair_to}", f"from {attr} {v} to {attr} {pair_to}",
                         f"{attr} from {v} to {pair_to}"])
    if p.kind == "bool":
        if v:
            return r.choice([f"{w} on", f"{w}: yes", f"{w} set to true", f"{w} = true", f"{w} true"])
        return r.choice([f"{w} off", f"{w}: no", f"{w} set to false", f"{w} = false", f"{w} false"])
    vt = value_text(p, v, r)
    if p.kind == "enum":
        return r.choice([f"{w} {vt}", f"{vt} {w}", f"{w}: {vt}"])
    return r.choice([f"{w} {vt}", f"{w}: {vt}", f"{w} = {vt}", f"{w} set to {vt}"])


def request(tool, args, r):
    """A request that names the verb and the entity and mentions every argument."""
    byname = {p.name: p for p in tool.params}
    phrases = []
    names = list(args)
    for i, k in enumerate(names):
        p = byname[k]
        if p.kind == "pair_to":
            continue
        if p.kind == "pair_from":
            phrases.append(param_phrase(p, args[k], r, pair_to=args[names[i + 1]]))
        else:
            phrases.append(param_phrase(p, args[k], r))
    if len(phrases) > 1 and r.random() < 0.4:
        r.shuffle(phrases)
    vt = verb_text(tool.verb)
    det = "the" if tool.obj == tool.entities else r.choice(["the", article(tool.obj), "my", "this"])
    lead, end = r.choice([(f"{vt.capitalize()} {det} {tool.obj}", "."), (f"Please {vt} {det} {tool.obj}", "."),
                          (f"Can you {vt} {det} {tool.obj}", "?"), (f"I need to {vt} {det} {tool.obj}", "."),
                          (f"Could you {vt} {det} {tool.obj}", "?"), (f"I want to {vt} {det} {tool.obj}", ".")])
    if tool.ns and r.random() < 0.5:
        lead += f" in {tool.ns}"
    if not phrases:
        return lead + end
    how = r.random()
    if how < 0.5:
        return f"{lead} with {join_and(phrases)}{end}"
    if how < 0.8:
        return f"{lead}: {', '.join(phrases)}{end}"
    return f"{lead.replace('Can you ', '').replace('Could you ', '').capitalize()}. Use {join_and(phrases)}."


def reasoning_call(tool, args):
    ps = ", ".join(args)
    tail = f" with {ps}" if ps else " without arguments"
    return f"The user wants to {verb_text(tool.verb)} {tool.obj}. The {tool.name} function does that, so I will call it{tail}."


def reasoning_nofit(tool):
    return (f"The user wants to {verb_text(tool.verb)} {tool.obj}, but none of the listed functions does that. "
            "I should say so instead of calling one.")


def nofit_answer(tool, r):
    vt = verb_text(tool.verb)
    return r.choice([f"Sorry, none of the available tools can {vt} {tool.obj}.",
                     f"I cannot {vt} {tool.obj}: no listed function does that.",
                     f"None of the functions I have can {vt} {tool.obj}, so I cannot do that right now."])


def result(tool, args, r):
    """A small synthetic tool result."""
    res = {"status": "ok"}
    if tool.obj == tool.entity:
        res[f"{tool.entity}_id"] = r.randint(100, 99999)
    else:
        res["count"] = r.randint(0, 12)
    return res


def answer(tool, args, res, r):
    subj = tool.obj.capitalize() if tool.obj == tool.entities else f"The {tool.obj}"
    if "count" in res:
        return r.choice([f"Done: {res['count']} {tool.obj} {tool.past}.", f"{subj} {tool.past}: {res['count']} in total."])
    rid = res[f"{tool.entity}_id"]
    return r.choice([f"Done: the {tool.obj} was {tool.past} (id {rid}).", f"{subj} has been {tool.past}; its id is {rid}.",
                     f"I {tool.past} the {tool.obj}. The id is {rid}."])
