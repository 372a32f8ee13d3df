#!/usr/bin/env python3
"""Compare `edge-llm bench bfcl`'s AST checker with bfcl's own, on the real data.

For every entry of the chosen categories this builds answers (the ground truth and
perturbations of it), scores each variant with bfcl's Python `ast_checker` the way
MLPerf's harness calls it (model name `gpt-4o-2024-11-20-FC`; irrelevance correct
iff no call), scores the same answers with `edge-llm bench bfcl --answers`, and
reports how often the two verdicts agree, per variant.

Needs the unpacked `bfcl-eval` wheel (only its pure-Python checker is imported; the
package's heavy dependencies are not needed):

    pip download bfcl-eval --no-deps -d /tmp/bfcl && unzip -q /tmp/bfcl/*.whl -d /tmp/bfcl/whl
    python3 tools/reference/bfcl_check_compare.py --wheel /tmp/bfcl/whl \
        --edge-llm target/release/edge-llm

Not used by CI.
"""

import argparse
import copy
import json
import random
import subprocess
import sys
import tempfile
import types
from pathlib import Path

CATEGORIES = [
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel",
    "parallel_multiple", "live_simple", "live_multiple", "live_parallel",
    "live_parallel_multiple", "irrelevance", "live_irrelevance",
]
HALLUCINATION = {"irrelevance", "live_irrelevance"}
MODEL = "gpt-4o-2024-11-20-FC"


def import_checker(wheel):
    sys.path.insert(0, str(wheel))
    # model_config imports every API client; the checker only reads one flag from it.
    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = {MODEL: types.SimpleNamespace(underscore_to_dot=True)}
    sys.modules["bfcl_eval.constants.model_config"] = stub
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    return ast_checker, Language


def bfcl_convert_to_tool(wheel):
    """bfcl's own `convert_to_tool`, lifted from model_handler/utils.py (importing
    that module pulls in tree-sitter and the API clients)."""
    import ast
    import re
    from bfcl_eval.constants.enums import ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    path = Path(wheel) / "bfcl_eval" / "model_handler" / "utils.py"
    tree = ast.parse(path.read_text())
    wanted = {"_cast_to_openai_type", "convert_to_tool"}
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    scope = {"copy": copy, "re": re, "json": json, "ModelStyle": ModelStyle,
             "GORILLA_TO_OPENAPI": GORILLA_TO_OPENAPI}
    exec(compile(ast.Module(body=funcs, type_ignores=[]), str(path), "exec"), scope)
    return lambda functions: scope["convert_to_tool"](
        functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)


def compare_requests(args, data, categories):
    """The request bodies edge-llm writes against the harness's construction."""
    convert = bfcl_convert_to_tool(args.wheel)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "requests.jsonl"
        subprocess.run(
            [args.edge_llm, "bench", "bfcl", "--data", str(data), "--categories",
             ",".join(categories), "--self-check", "--requests", str(out)],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ours = {r["id"]: r["body"] for r in read_jsonl(out)}
    same = total = 0
    for category in categories:
        for entry in read_jsonl(data / f"BFCL_v4_{category}.json"):
            body = ours[entry["id"]]
            messages = [{"role": m["role"], "content": m.get("content") or ""}
                        for turn in entry["question"] for m in turn]
            try:
                tools = convert(entry["function"])
            except Exception as e:  # bfcl raises on a few schemas
                tools = f"raised {type(e).__name__}"
            # Byte-identical JSON (key order included) is what reaches the template.
            ok = (json.dumps(body["tools"]) == json.dumps(tools)
                  and body["messages"] == messages and body["tool_choice"] == "auto")
            total += 1
            same += ok
            if not ok and total - same <= 3:
                print(f"  REQUEST DIFFERS {entry['id']}")
    print(f"request bodies identical to the harness's: {same}/{total}")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def first_value(acceptable, last=False):
    """The first (or last) acceptable value that is not "", as a 1-tuple; None where
    "" is the only one (the parameter is then left out)."""
    return next(((v,) for v in (reversed(acceptable) if last else acceptable) if v != ""), None)


def concrete(value, details):
    """A dict answer {key: [acceptable]} becomes {key: first acceptable}."""
    def dict_of_lists(v):
        if not isinstance(v, dict):
            return v
        return {k: fv[0] for k, vals in v.items() if (fv := first_value(vals))}
    ty = details.get("type", "")
    items = details.get("items", {}).get("type", "")
    if ty in ("dict", "HashMap") and isinstance(value, dict):
        return dict_of_lists(value)
    if ty in ("array", "ArrayList", "Array") and items == "dict" and isinstance(value, list):
        return [dict_of_lists(v) for v in value]
    return value


def num(v):
    return str(v).replace("True", "true").replace("False", "false")


def java_literal(v, ty, items):
    def scalar(x, t):
        if isinstance(x, str):
            return x
        if t == "long":
            return f"{num(x)}L"
        if t == "float":
            return f"{num(x)}f"
        return num(x)
    def untyped(x):
        return f'"{x}"' if isinstance(x, str) else num(x)
    if ty == "Array" and isinstance(v, list):
        inner = items or "Object"
        return f"new {inner}[]{{{', '.join(scalar(x, inner) for x in v)}}}"
    if ty == "ArrayList" and isinstance(v, list):
        if not v:
            return "new ArrayList<>()"
        inner = items or "Object"
        elems = [f'"{x}"' if inner in ("String", "char") else scalar(x, inner) for x in v]
        return f"new ArrayList<>(Arrays.asList({', '.join(elems)}))"
    if ty == "HashMap" and isinstance(v, dict):
        puts = " ".join(f'put("{k}", {untyped(x)});' for k, x in v.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}"
    return scalar(v, ty)


def js_literal(v, ty):
    def element(x):
        if isinstance(x, str):
            return f'"{x}"'
        if isinstance(x, list):
            return "[" + ", ".join(element(e) for e in x) + "]"
        if isinstance(x, dict):
            return "{" + ", ".join(f"{k}: {element(e)}" for k, e in x.items()) + "}"
        return num(x)
    if isinstance(v, str):
        return v
    if ty == "Bigint":
        return f"{num(v)}n"
    if ty in ("array", "dict"):
        return element(v)
    return num(v)


def ground_truth_calls(entry, truth, category, last=False, encode=True):
    calls = []
    for call in truth:
        name, params = next(iter(call.items()))
        desc = next((f for f in entry["function"] if f["name"] == name), None)
        props = desc["parameters"]["properties"] if desc else {}
        args = {}
        for param, acceptable in params.items():
            fv = first_value(acceptable, last)
            if fv is None:
                continue
            if param not in props and "" in acceptable:
                continue  # an optional parameter the schema lacks
            details = props.get(param, {})
            v = concrete(fv[0], details)
            if not encode:
                pass
            elif category == "simple_java":
                v = java_literal(v, details.get("type", ""), details.get("items", {}).get("type"))
            elif category == "simple_javascript":
                v = js_literal(v, details.get("type", ""))
            args[param] = v
        calls.append({"name": name.replace(".", "_"), "arguments": args})
    return calls


def other_type(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return str(v)
    if isinstance(v, str):
        return 7
    if isinstance(v, list):
        return "x"
    if isinstance(v, dict):
        return "x"
    return 1


def other_value(v):
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        return v + 1.5
    if isinstance(v, str):
        return v + "zz"
    if isinstance(v, list):
        return v + (v[:1] if v else ["zz"])
    if isinstance(v, dict):
        return {**v, "zz_key": 1}
    return v


def fancy_case(v):
    """Upper-case strings and add characters bfcl's normalisation removes."""
    if isinstance(v, str):
        return " " + v.upper().replace(" ", "_ ") + "."
    if isinstance(v, list):
        return [fancy_case(x) if isinstance(x, str) else x for x in v]
    return v


def variants(entry, truth, category, rng):
    """name -> calls (or None where the variant does not apply)."""
    if category in HALLUCINATION:
        name = entry["function"][0]["name"] if entry["function"] else "anything"
        return {
            "no_call": [],
            "a_call": [{"name": name.replace(".", "_"), "arguments": {}}],
        }
    gt = ground_truth_calls(entry, truth, category)
    out = {"ground_truth": gt}
    c0 = gt[0]
    args = c0["arguments"]
    desc = next(f for f in entry["function"] if f["name"].replace(".", "_") == c0["name"])
    required = [p for p in desc["parameters"].get("required", []) if p in args]
    keys = list(args)

    def with_args(new_args, name=None):
        calls = copy.deepcopy(gt)
        calls[0]["arguments"] = new_args
        if name:
            calls[0]["name"] = name
        return calls

    out["wrong_name"] = with_args(args, c0["name"] + "_x")
    out["extra_param"] = with_args({**args, "zz_unexpected": 1})
    if required:
        p = rng.choice(required)
        out["drop_required"] = with_args({k: v for k, v in args.items() if k != p})
    if keys:
        p = rng.choice(keys)
        out["wrong_type"] = with_args({**args, p: other_type(args[p])})
        p = rng.choice(keys)
        out["wrong_value"] = with_args({**args, p: other_value(args[p])})
        out["case_and_punctuation"] = with_args({k: fancy_case(v) for k, v in args.items()})
        # A float for an int and an int for a float: Python's type rules decide.
        out["numeric_kind"] = with_args({
            k: (float(v) if type(v) is int else int(v) if type(v) is float and v.is_integer() else v)
            for k, v in args.items()
        })
    optional = [k for k in keys if k not in desc["parameters"].get("required", [])]
    if optional:
        p = rng.choice(optional)
        out["omit_optional"] = with_args({k: v for k, v in args.items() if k != p})
    out["last_acceptable"] = ground_truth_calls(entry, truth, category, last=True)
    if category in ("simple_java", "simple_javascript"):
        out["raw_values"] = ground_truth_calls(entry, truth, category, encode=False)
    if keys:
        p = rng.choice(keys)
        out["null_value"] = with_args({**args, p: None})
    lists = [k for k in keys if isinstance(args[k], list) and args[k]]
    if lists:
        p = rng.choice(lists)
        flipped = [float(x) if type(x) is int else int(x) if type(x) is float and x.is_integer()
                   else str(x) if not isinstance(x, str) else x for x in args[p]]
        out["list_element_kind"] = with_args({**args, p: flipped})
    dicts = [k for k in keys if isinstance(args[k], dict) and args[k]]
    if dicts:
        p = rng.choice(dicts)
        d = dict(args[p])
        d.pop(rng.choice(list(d)))
        out["dict_drop_key"] = with_args({**args, p: d})
    out["extra_call"] = gt + [copy.deepcopy(gt[0])]
    out["no_call"] = []
    if len(gt) > 1:
        out["reversed"] = list(reversed(gt))
        out["drop_call"] = gt[:-1]
    out["malformed_json"] = with_args("{not json")
    return out


def python_verdict(ast_checker, Language, entry, truth, category, calls):
    if category in HALLUCINATION:
        return len(calls) == 0
    decoded = []
    for c in calls:
        args = c["arguments"]
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = {}  # as MLPerf's scorer does with unparseable arguments
        decoded.append({c["name"]: args})
    lang = {"simple_java": Language.JAVA, "simple_javascript": Language.JAVASCRIPT}.get(
        category, Language.PYTHON)
    try:
        return ast_checker(entry["function"], decoded, truth, lang, category, MODEL)["valid"]
    except Exception as e:  # bfcl raises on some inputs; the harness would then fail
        return f"raised {type(e).__name__}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wheel", required=True, type=Path, help="unpacked bfcl-eval wheel")
    ap.add_argument("--edge-llm", required=True, help="the edge-llm binary")
    ap.add_argument("--categories", default=",".join(CATEGORIES))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=5, help="disagreements to print per variant")
    args = ap.parse_args()
    ast_checker, Language = import_checker(args.wheel)
    data = args.wheel / "bfcl_eval" / "data"
    compare_requests(args, data, args.categories.split(",") + ["live_relevance"])
    rng = random.Random(args.seed)

    # (category, variant) -> {id: (python verdict, calls)}
    table = {}
    entries = {}
    for category in args.categories.split(","):
        truths = {}
        gt_path = data / "possible_answer" / f"BFCL_v4_{category}.json"
        if gt_path.exists():
            truths = {e["id"]: e["ground_truth"] for e in read_jsonl(gt_path)}
        for entry in read_jsonl(data / f"BFCL_v4_{category}.json"):
            truth = truths.get(entry["id"])
            entries[entry["id"]] = entry
            for name, calls in variants(entry, truth, category, rng).items():
                v = python_verdict(ast_checker, Language, entry, truth, category, calls)
                table.setdefault((category, name), {})[entry["id"]] = (v, calls)

    names = sorted({n for _, n in table})
    total_agree = total = 0
    print(f"{'variant':<22} {'n':>6} {'py ok':>6} {'rs ok':>6} {'py raised':>9} {'agree':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            cats = sorted({c for c, n in table if n == name})
            answers = Path(tmp) / f"{name}.jsonl"
            rows = {i: r for c in cats for i, r in table[(c, name)].items()}
            with open(answers, "w") as f:
                for i, (_, calls) in rows.items():
                    f.write(json.dumps({"id": i, "tool_calls": calls}) + "\n")
            report = Path(tmp) / f"{name}.report.json"
            # Entries a variant does not apply to have no recorded answer; they are
            # skipped below.
            subprocess.run(
                [args.edge_llm, "bench", "bfcl", "--data", str(data), "--categories",
                 ",".join(cats), "--answers", str(answers), "--report", str(report)],
                check=True, stdout=subprocess.DEVNULL)
            rust = {s["id"]: s for s in json.load(open(report))["samples"]}
            agree = n = py_ok = rs_ok = raised = 0
            shown = 0
            for i, (pv, calls) in rows.items():
                rv = rust[i]["correct"]
                n += 1
                py_ok += pv is True
                raised += isinstance(pv, str)
                rs_ok += rv
                if (pv is True) == rv:
                    agree += 1
                elif shown < args.show:
                    shown += 1
                    print(f"  DISAGREE {name} {i}: python={pv} rust={rv} ({rust[i]['reason']})")
                    print(f"     calls={json.dumps(calls)[:300]}")
            total_agree += agree
            total += n
            print(f"{name:<22} {n:>6} {py_ok:>6} {rs_ok:>6} {raised:>9} {100 * agree / n:>7.2f}%")
    print(f"{'all':<22} {total:>6} {'':>6} {'':>6} {'':>9} {100 * total_agree / total:>7.2f}%")


if __name__ == "__main__":
    main()
