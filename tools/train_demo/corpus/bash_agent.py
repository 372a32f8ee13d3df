"""Coding-agent sessions with the `bash` tool over an invented Python repository."""

from __future__ import annotations

from .pools import PEOPLE
from .typed_convs import train_pool


# ----------------------------------------------------------------------------- bash agent

BASH_TOOL = {"type": "function", "function": {
    "name": "bash", "description": "Run a bash command in the repository shell and return its output.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The bash command to run"}},
                   "required": ["command"]}}}

PKGS = ["datekit", "tinyhttp", "pyconfig", "mathutils", "textstat", "csvtools", "loglib", "geoparse", "cachelib",
        "authkit", "slugger", "unitconv", "tasklib", "netcheck"]
MODS = ["utils", "core", "parser", "io", "models", "cli", "helpers", "config", "stats", "text", "net", "cache"]

# (function name, module hint, buggy line, fixed line, sed expression, test call, wrong, right, doc)
BUGS = [
    ("compute_mean", "stats", "    return sum(values) / (len(values) - 1)", "    return sum(values) / len(values)",
     "s/(len(values) - 1)/len(values)/", "compute_mean([1, 2, 3])", "3.0", "2.0", "Return the arithmetic mean."),
    ("slugify", "text", "    return text.lower().replace(\" \", \"_\")", "    return text.lower().replace(\" \", \"-\")",
     "s/replace(\" \", \"_\")/replace(\" \", \"-\")/", "slugify(\"Hello World\")", "'hello_world'", "'hello-world'", "Turn text into a URL slug."),
    ("format_bytes", "utils", "    if size < 1000:", "    if size < 1024:", "s/size < 1000/size < 1024/",
     "format_bytes(1000)", "'1.0 KB'", "'1000 B'", "Format a byte count for humans."),
    ("clamp", "helpers", "    return max(low, min(value, low))", "    return max(low, min(value, high))",
     "s/min(value, low)/min(value, high)/", "clamp(5, 0, 10)", "0", "5", "Clamp value into [low, high]."),
    ("merge_dicts", "config", "    result = base", "    result = dict(base)", "s/result = base/result = dict(base)/",
     "merge_dicts(a, b) is not a", "False", "True", "Merge two dicts without mutating base."),
    ("word_count", "text", "    return len(text.split(\" \"))", "    return len(text.split())",
     "s/text.split(\" \")/text.split()/", "word_count(\"a  b\")", "3", "2", "Count words in text."),
    ("is_valid_port", "net", "    return 0 < port <= 65536", "    return 0 < port <= 65535",
     "s/65536/65535/", "is_valid_port(65536)", "True", "False", "Check a TCP port number."),
    ("retry_count", "core", "    return attempts - 1", "    return attempts", "s/return attempts - 1/return attempts/",
     "retry_count(3)", "2", "3", "Number of retries to perform."),
    ("parse_bool", "parser", "    return value == \"true\"", "    return value.lower() == \"true\"",
     "s/return value == \"true\"/return value.lower() == \"true\"/", "parse_bool(\"True\")", "False", "True", "Parse a boolean string."),
    ("last_item", "utils", "    return items[len(items)]", "    return items[-1]", "s/items\\[len(items)\\]/items[-1]/",
     "last_item([1, 2])", "IndexError", "2", "Return the last element."),
]


class Repo:
    def __init__(self, r):
        self.pkg = r.choice(PKGS)
        self.root = r.choice(["/testbed", f"/workspace/{self.pkg}", "/repo", f"/home/user/{self.pkg}"])
        self.src = r.choice([f"src/{self.pkg}", self.pkg])
        self.bug = r.choice(BUGS)
        self.mods = r.sample([m for m in MODS if m != self.bug[1]], 3) + [self.bug[1]]
        r.shuffle(self.mods)
        self.file = f"{self.src}/{self.bug[1]}.py"
        self.test = f"tests/test_{self.bug[1]}.py"
        self.line = r.randint(8, 60)
        self.ntests = r.randint(4, 12)

    def tree(self):
        top = sorted(["README.md", "pyproject.toml", "tests", self.src.split("/")[0], ".git", "setup.cfg"])
        return "\n".join(top)

    def src_listing(self):
        return "\n".join(sorted(["__init__.py"] + [f"{m}.py" for m in self.mods]))

    def func_source(self, fixed=False):
        name, _, bad, good, *_rest = self.bug
        doc = self.bug[8]
        args = {"compute_mean": "values", "slugify": "text", "format_bytes": "size", "clamp": "value, low, high",
                "merge_dicts": "base, extra", "word_count": "text", "is_valid_port": "port", "retry_count": "attempts",
                "parse_bool": "value", "last_item": "items"}[name]
        lines = [f"def {name}({args}):", f"    \"\"\"{doc}\"\"\"", good if fixed else bad]
        if name == "format_bytes":
            lines[2:2] = []
            lines = lines + ["        return f\"{size} B\"", "    return f\"{size / 1024:.1f} KB\""]
        if name == "merge_dicts":
            lines = lines + ["    result.update(extra)", "    return result"]
        return lines


def bash_conversation(r, split):
    rp = Repo(r)
    name, mod, bad, good, sed, call, wrong, right, doc = rp.bug
    think = r.random() < 0.5
    steps = []  # (reasoning, [commands], [outputs])
    kind = r.choices(["fix", "explore", "git", "deps", "todo", "script", "count"], [5, 2, 2, 2, 1, 2, 1])[0]
    cd = r.random() < 0.35

    def c(cmd):
        return f"cd {rp.root} && {cmd}" if cd else cmd

    def pytest_fail(q=True):
        dots = "".join("F" if i == 1 else "." for i in range(rp.ntests))
        msg = f"assert {wrong} == {right}" if wrong != "IndexError" else "IndexError: list index out of range"
        if q:
            return f"{dots}\nFAILED {rp.test}::test_{name} - {msg}\n1 failed, {rp.ntests - 1} passed in 0.{r.randint(10, 99)}s"
        return (f"collected {rp.ntests} items\n\n{rp.test} {dots}\n\n___ test_{name} ___\n    def test_{name}():\n>       assert {call} == {right}\n"
                f"E       {msg}\n{rp.test}:{r.randint(5, 40)}: AssertionError\nFAILED {rp.test}::test_{name}\n1 failed, {rp.ntests - 1} passed in 0.{r.randint(10, 99)}s")

    def pytest_pass():
        return f"{'.' * rp.ntests}\n{rp.ntests} passed in 0.{r.randint(10, 99)}s"

    if kind == "fix":
        user = r.choice([f"The test test_{name} in {rp.test} is failing. Please find the bug and fix it.",
                         f"{name} returns the wrong result: {call} should be {right}. Fix it and make sure the tests pass.",
                         f"Running pytest in {rp.root} shows a failure in test_{name}. Can you fix the code?"])
        if r.random() < 0.7:
            steps.append((f"I will start by looking at the layout of the repository.", [c(r.choice(["ls", "ls -la", "ls -F"]))], [rp.tree()]))
        if r.random() < 0.5:
            steps.append(("Let me reproduce the failure first.", [c(f"python -m pytest {rp.test} -q")], [pytest_fail()]))
        steps.append((f"I need to find where {name} is defined.", [c(f"grep -rn \"def {name}\" {rp.src.split('/')[0]}/")],
                      [f"{rp.file}:{rp.line}:def {name}("]))
        src = rp.func_source()
        if r.random() < 0.5:
            cmd = f"sed -n '{rp.line},{rp.line + len(src) + 2}p' {rp.file}"
        else:
            cmd = f"cat {rp.file} | head -n {rp.line + len(src) + 2} | tail -n {len(src) + 3}"
        steps.append((f"Let me read the source of {name}.", [c(cmd)], ["\n".join(src)]))
        steps.append((f"The bug is in the line `{bad.strip()}`; it should be `{good.strip()}`. I will fix it with sed.",
                      [c(f"sed -i '{sed}' {rp.file}")], [""]))
        if r.random() < 0.4:
            steps.append(("Let me check the diff.", [c("git diff")],
                          [f"--- a/{rp.file}\n+++ b/{rp.file}\n@@ -{rp.line},3 +{rp.line},3 @@\n-{bad}\n+{good}"]))
        steps.append(("Now I run the tests again to confirm the fix.", [c(r.choice([f"python -m pytest {rp.test} -q", f"pytest {rp.test} -q", "python -m pytest -q"]))], [pytest_pass()]))
        final = f"Fixed {name} in {rp.file}: the line `{bad.strip()}` was changed to `{good.strip()}`. All {rp.ntests} tests in {rp.test} pass now."
    elif kind == "explore":
        user = r.choice([f"Give me an overview of the {rp.pkg} package: which modules does it have?",
                         f"What Python modules are in {rp.src}?", "Which files make up the source package here?"])
        steps.append(("I will list the source directory.", [c(f"ls {rp.src}")], [rp.src_listing()]))
        if r.random() < 0.6:
            counts = {m: r.randint(20, 400) for m in rp.mods}
            total = sum(counts.values())
            steps.append(("Let me also count the lines in each module.", [c(f"wc -l {rp.src}/*.py")],
                          ["\n".join(f"  {counts[m]} {rp.src}/{m}.py" for m in rp.mods) + f"\n  {total} total"]))
            final = f"The {rp.pkg} package has {len(rp.mods)} modules: {', '.join(rp.mods)} ({total} lines in total)."
        else:
            final = f"The package in {rp.src} contains {', '.join(m + '.py' for m in rp.mods)} plus __init__.py."
    elif kind == "git":
        user = r.choice(["What changed in the last few commits?", "Show me the recent git history.", "Who made the last commit and what did it change?"])
        author = r.choice(PEOPLE)
        msgs = [f"Fix {name} edge case", f"Add tests for {mod}", "Update README", f"Refactor {rp.mods[0]} module", "Bump version"]
        r.shuffle(msgs)
        hashes = [f"{r.getrandbits(28):07x}" for _ in range(3)]
        steps.append(("I will look at the git log.", [c(r.choice(["git log --oneline -3", "git log --oneline -n 3"]))],
                      ["\n".join(f"{h} {m}" for h, m in zip(hashes, msgs))]))
        if r.random() < 0.6:
            steps.append(("Let me see the files touched by the latest commit.", [c("git show --stat HEAD")],
                          [f"commit {hashes[0]}\nAuthor: {author} <{author}@example.com>\n\n    {msgs[0]}\n\n {rp.file} | {r.randint(1, 9)} ++--\n 1 file changed"]))
            final = f"The latest commit {hashes[0]} by {author} is \"{msgs[0]}\" and touched {rp.file}. Before that: \"{msgs[1]}\" and \"{msgs[2]}\"."
        else:
            final = "The last three commits are: " + "; ".join(f"{h} {m}" for h, m in zip(hashes, msgs)) + "."
    elif kind == "deps":
        user = r.choice(["Install the dependencies and run the test suite.", "Set up the project and check that the tests pass.",
                         f"Can you install {rp.pkg} in development mode and run pytest?"])
        if r.random() < 0.5:
            steps.append(("I will install the package in editable mode.", [c("pip install -e .")],
                          [f"Obtaining file://{rp.root}\nSuccessfully installed {rp.pkg}-0.{r.randint(1, 9)}.{r.randint(0, 9)}"]))
        else:
            steps.append(("I will install the requirements first.", [c("pip install -r requirements.txt")],
                          [f"Collecting pytest\nSuccessfully installed pytest-8.{r.randint(0, 3)}.{r.randint(0, 4)} pluggy-1.5.0"]))
        ok = r.random() < 0.6
        steps.append(("Now I run the tests.", [c(r.choice(["python -m pytest -q", "pytest -q", "pytest"]))], [pytest_pass() if ok else pytest_fail(q=r.random() < 0.7)]))
        final = (f"Dependencies are installed and all {rp.ntests} tests pass." if ok else
                 f"Dependencies are installed. {rp.ntests - 1} tests pass but test_{name} fails ({call} gives {wrong}, expected {right}).")
    elif kind == "todo":
        user = r.choice(["Find all TODO comments in the code.", "Are there any TODOs left in the source?"])
        n = r.randint(0, 3)
        hits = [f"{rp.src}/{r.choice(rp.mods)}.py:{r.randint(3, 200)}:    # TODO: {r.choice(['handle errors', 'add caching', 'remove this hack', 'support unicode', 'write docs'])}" for _ in range(n)]
        steps.append(("I will grep for TODO markers.", [c(f"grep -rn \"TODO\" {rp.src.split('/')[0]}/")], ["\n".join(hits)]))
        final = (f"There are {n} TODO comment(s):\n" + "\n".join("- " + h for h in hits)) if n else "There are no TODO comments in the source."
    elif kind == "script":
        script = r.choice(["main.py", "run.py", "scripts/demo.py", "app.py"])
        user = r.choice([f"Run {script} and tell me what it prints.", f"Does {script} work?"])
        fails = r.random() < 0.5
        if fails:
            steps.append((f"I will run {script}.", [c(f"python {script}")],
                          [f"Traceback (most recent call last):\n  File \"{rp.root}/{script}\", line {r.randint(3, 30)}, in <module>\n    from {rp.pkg}.{mod} import {name}\nModuleNotFoundError: No module named '{rp.pkg}'"]))
            steps.append(("The package is not installed. I will install it and run the script again.", [c(f"pip install -e . && python {script}")],
                          [f"Successfully installed {rp.pkg}-0.1.0\nready: {r.randint(1, 99)} items processed"]))
            final = f"{script} failed at first because {rp.pkg} was not installed; after `pip install -e .` it runs and prints the processed item count."
        else:
            out = f"ready: {r.randint(1, 99)} items processed"
            steps.append((f"I will run {script}.", [c(f"python {script}")], [out]))
            final = f"{script} runs fine and prints: {out}"
    else:  # count
        user = r.choice(["How many Python files are in this repository?", "Count the test files in the project."])
        tests = "test" in user
        n = r.randint(3, 60)
        cmd = "find tests -name \"test_*.py\" | wc -l" if tests else "find . -name \"*.py\" | wc -l"
        steps.append(("I will count them with find and wc.", [c(cmd)], [str(n)]))
        final = f"There are {n} {'test' if tests else 'Python'} files."

    # parallel calls occasionally: merge two adjacent read-only steps
    if len(steps) >= 3 and r.random() < 0.1:
        a, b = steps[0], steps[1]
        steps[0:2] = [(a[0] + " " + b[0], a[1] + b[1], a[2] + b[2])]

    tools = [BASH_TOOL]
    if r.random() < 0.3:  # typed distractors
        for t in r.sample(train_pool(split), r.randint(1, 2)):
            tools.append(t.instantiate(r, split)[0])
        r.shuffle(tools)
    messages = []
    if r.random() < 0.8:
        messages.append({"role": "system", "content": r.choice([
            f"You are a coding agent working in the repository at {rp.root}. Use the bash tool to inspect and change files.",
            f"You are an autonomous software engineer. The repository is checked out at {rp.root}.",
            "You are a helpful coding assistant with shell access."])})
    messages.append({"role": "user", "content": user})
    for reasoning, cmds, outs in steps:
        messages.append({"role": "assistant", "content": "", "reasoning_content": reasoning if think else "",
                         "tool_calls": [{"type": "function", "function": {"name": "bash", "arguments": {"command": cmd}}} for cmd in cmds]})
        for o in outs:
            messages.append({"role": "tool", "content": o})
    messages.append({"role": "assistant", "content": final,
                     "reasoning_content": ("The task is done, so I can summarize the result." if think else "")})
    return {"kind": f"bash_{kind}", "tools": tools, "messages": messages, "enable_thinking": think}
