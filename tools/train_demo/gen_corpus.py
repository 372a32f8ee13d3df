#!/usr/bin/env python3
"""Seeded synthetic multi-turn agent conversations in the Qwen3.5 chat format.

Two families of conversations:

* coding-agent sessions with a ``bash`` tool (ls, cat, grep, sed, find, git, python,
  pytest, pip ... over a randomly generated repository, with synthetic outputs);
* typed function calling over a pool of invented tools (integer, number, boolean, enum,
  array and object parameters), with distractor tools, per-conversation tool-name and
  parameter-name aliases (canonical names 85% of the time), parallel and sequential
  calls, turns that need no tool and requests that no listed tool can serve.

Each output line is one conversation: ``tools`` (OpenAI format), ``messages``,
``enable_thinking`` (False: every reasoning_content is empty, the model's default mode),
``text`` (rendered by chatfmt.render, identical to the chat template) and ``spans``
(character ranges of the assistant turns to train on, i.e. those after the last user
query). The held-out split uses a different seed; a quarter of its tool names, and a few
tools, never occur in the training split (a generalisation probe that evaluate.py reports
apart from the headline numbers).

Usage: gen_corpus.py --out DIR [--seed 1234] [--n-train 20000] [--n-heldout 300]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chatfmt import render  # noqa: E402

# ----------------------------------------------------------------------------- pools

CITIES = ["Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Toronto", "Sydney", "Cairo", "Mumbai",
          "Seoul", "Lima", "Oslo", "Dublin", "Lisbon", "Boston", "Chicago", "Denver", "Austin", "Seattle",
          "Nairobi", "Jakarta", "Hanoi", "Prague", "Vienna", "Zurich", "Athens", "Warsaw", "Helsinki",
          "Istanbul", "Bangkok", "Singapore", "Montreal", "Vancouver", "Lagos", "Santiago", "Bogota",
          "Manila", "Osaka", "Munich", "Barcelona", "Amsterdam", "Brussels", "Stockholm", "Copenhagen",
          "Melbourne", "Auckland", "Phoenix", "Miami", "Portland"]
PEOPLE = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory",
          "nina", "oscar", "peggy", "rupert", "sybil", "trent", "victor", "wendy", "yusuf", "zoe", "liam",
          "maya", "noah", "olga", "priya", "quinn", "ravi", "sofia", "tomas"]
DOMAINS = ["example.com", "acme.io", "corp.net", "mail.org"]
REPOS = ["acme/webapp", "acme/api-server", "octo/cli-tools", "data/pipeline", "ml/trainer", "infra/deploy",
         "web/frontend", "core/auth-service", "labs/scheduler", "tools/linter", "team/mobile-app",
         "oss/parser-lib", "payments/gateway", "search/indexer", "platform/billing"]
LABELS = ["bug", "enhancement", "documentation", "performance", "security", "good first issue", "regression",
          "ui", "backend", "flaky-test", "needs-triage"]
TOPICS = ["memory leak", "login timeout", "slow query", "broken link", "crash on startup", "race condition",
          "missing translation", "wrong timezone", "upload failure", "cache invalidation", "null pointer",
          "dark mode", "rate limiting", "unicode error", "CSV export"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "INR", "CNY", "SEK", "BRL", "MXN"]
SYMBOLS = ["AAPL", "MSFT", "GOOG", "AMZN", "NVDA", "TSLA", "META", "IBM", "ORCL", "INTC", "AMD", "SAP"]
LANGS = ["French", "German", "Spanish", "Italian", "Japanese", "Portuguese", "Dutch", "Korean", "Swedish",
         "Polish", "Turkish", "Greek"]
PHRASES = ["Good morning", "Where is the train station", "Thank you very much", "The meeting is at noon",
           "Please close the door", "How much does this cost", "I would like a coffee", "See you tomorrow",
           "The package has arrived", "Happy birthday"]
ROOMS = ["living room", "bedroom", "kitchen", "office", "guest room", "basement", "nursery"]
SONGS = [("Blue Horizon", "The Wanderers"), ("Midnight Train", "Echo Valley"), ("Paper Moon", "Lena Ford"),
         ("Golden Hour", "Sam Rivers"), ("City Lights", "Neon Kids"), ("Slow River", "Iris Cole"),
         ("Northern Sky", "Polar Bears"), ("Rust and Gold", "June Avenue")]
FOODS = ["margherita pizza", "pad thai", "caesar salad", "ramen", "burrito", "falafel wrap", "sushi roll",
         "cheeseburger", "veggie curry", "pho", "garlic bread", "miso soup", "tacos", "lasagna"]
RESTAURANTS = ["Luigi Trattoria", "Bangkok Garden", "Green Bowl", "Tokyo Table", "Casa Verde", "Burger Barn",
               "Spice Route", "Noodle House"]
CUISINES = ["italian", "thai", "japanese", "mexican", "indian", "vegan", "french", "korean"]
SERVICES = ["api-gateway", "auth-service", "billing", "search", "notifications", "frontend", "worker",
            "scheduler", "payments", "inventory"]
NAMESPACES = ["default", "production", "staging", "dev", "monitoring"]
DATABASES = ["analytics", "sales", "inventory", "users", "events", "crm"]
TABLES = [("orders", "total"), ("customers", "country"), ("events", "type"), ("invoices", "amount"),
          ("products", "price"), ("sessions", "duration")]
NEWS_TOPICS = ["technology", "sports", "science", "business", "health", "climate", "space", "music"]
COUNTRIES = ["us", "uk", "de", "fr", "jp", "in", "br", "ca"]
CARRIERS = ["ups", "fedex", "dhl", "usps"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
MEETINGS = ["Sprint planning", "Design review", "Budget sync", "Weekly standup", "Customer demo",
            "Roadmap discussion", "Incident retro", "Onboarding session", "Quarterly review"]
MONTHS = ["2025-03", "2025-04", "2025-05", "2025-06", "2025-07", "2025-08", "2025-09", "2025-10"]
FILE_DIRS = ["notes", "docs", "src", "config", "scripts", "data"]
FILE_NAMES = ["todo.txt", "README.md", "config.yaml", "notes.md", "setup.cfg", "run.sh", "hello.py",
              "settings.json", "CHANGELOG.md", "requirements.txt"]
FILE_CONTENTS = ["Buy milk and eggs", "# Project notes", "debug: true", "print(\"hello world\")",
                 "version = 1.2.0", "requests>=2.31", "TODO: write tests", "port: 8080",
                 "#!/bin/sh\necho ready", "name: demo\nreplicas: 2"]
KEYWORDS = ["python asyncio tutorial", "best hiking trails near Denver", "how to bake sourdough",
            "rust borrow checker explained", "cheap flights to Lisbon", "history of the printing press",
            "kubernetes liveness probe", "sql window functions", "electric car range comparison",
            "healthy breakfast ideas"]

GENERAL_QA = [
    ("What does HTTP status code 404 mean?", "404 means Not Found: the server could not find the requested resource."),
    ("What is the difference between a list and a tuple in Python?", "A list is mutable and can be changed after creation, while a tuple is immutable."),
    ("Explain what a git commit is in one sentence.", "A git commit is a snapshot of the tracked files in a repository together with a message and a pointer to its parent commit."),
    ("How many minutes are in a day?", "There are 1440 minutes in a day (24 times 60)."),
    ("What is the capital of Japan?", "The capital of Japan is Tokyo."),
    ("What does JSON stand for?", "JSON stands for JavaScript Object Notation."),
    ("Can you explain what recursion is?", "Recursion is when a function calls itself on a smaller version of the problem until it reaches a base case."),
    ("What is 15 times 12?", "15 times 12 is 180."),
    ("What port does HTTPS use by default?", "HTTPS uses port 443 by default."),
    ("What is a race condition?", "A race condition is a bug where the result depends on the timing of concurrent operations that access shared state."),
    ("Hi there!", "Hello! How can I help you today?"),
    ("Tell me a short joke.", "Why do programmers prefer dark mode? Because light attracts bugs."),
    ("What is the boiling point of water in Celsius?", "Water boils at 100 degrees Celsius at sea level."),
    ("What does the ls command do?", "ls lists the files and directories in the current directory."),
    ("What is a unit test?", "A unit test checks a small piece of code, such as a single function, in isolation."),
    ("How do I exit vim?", "Press Escape, then type :q and press Enter. Use :wq to save and quit, or :q! to quit without saving."),
    ("What is the square root of 144?", "The square root of 144 is 12."),
    ("Which planet is closest to the sun?", "Mercury is the planet closest to the sun."),
    ("What does CPU stand for?", "CPU stands for Central Processing Unit."),
    ("Give me a synonym for fast.", "A synonym for fast is quick."),
    ("What is a pull request?", "A pull request proposes changes from one branch to another so they can be reviewed before merging."),
    ("What is the time complexity of binary search?", "Binary search runs in O(log n) time."),
    ("How many bytes are in a kilobyte?", "A kilobyte is 1000 bytes, while a kibibyte is 1024 bytes."),
    ("What does pip do?", "pip is the Python package installer; it downloads and installs packages from PyPI."),
]
THANKS = [("Thanks!", "You are welcome! Let me know if you need anything else."),
          ("Great, thank you.", "Glad I could help."),
          ("Perfect, that is all I needed.", "Happy to help. Have a great day!"),
          ("Thanks for the help.", "Any time!")]
SYSTEM_PROMPTS = ["You are a helpful assistant.", "You are a concise assistant. Keep answers short.",
                  "You are an assistant for ACME Corp employees.", "You are a friendly assistant that uses tools when needed.",
                  "Answer in English.", "You are a personal assistant. Be brief and accurate."]


def email(r):
    return f"{r.choice(PEOPLE)}@{r.choice(DOMAINS)}"


def clock(r):
    return f"{r.randint(8, 17):02d}:{r.choice(['00', '15', '30', '45'])}"


def date(r):
    return f"{r.choice(MONTHS)}-{r.randint(1, 28):02d}"


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

    def __init__(self, key, names, held_names, desc, params, gen, result, answer, heldout_only=False):
        self.key, self.names, self.held_names, self.desc = key, names, held_names, desc
        self.params, self.gen, self.result, self.answer = params, gen, result, answer
        self.heldout_only = heldout_only

    def instantiate(self, r, split):
        """Choose a name and parameter aliases; return (schema, name, param-name map).

        Mostly the canonical (first) name and parameter names: a model of this size,
        trained for under an hour, learns request -> function reliably only for names it
        has seen often. Aliases keep it reading the schema; the held-out split also draws
        names never seen in training (a generalisation probe, reported separately)."""
        if split == "heldout" and self.held_names and r.random() < HELDOUT_UNSEEN_NAME_P:
            name = r.choice(self.held_names)
        else:
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
HELDOUT_UNSEEN_NAME_P = 0.25  # held-out tools renamed to a name never seen in training


def tool(**kw):
    TOOLS.append(Tool(**kw))


# weather ---------------------------------------------------------------------------------------
def _g_weather(r):
    c = r.choice(CITIES)
    a = {"location": c}
    ex = []
    if r.random() < 0.45:
        a["unit"] = r.choice(["celsius", "fahrenheit"])
        ex.append(f" in {a['unit']}")
    if r.random() < 0.3:
        a["days"] = r.randint(2, 7)
        ex.append(f" for the next {a['days']} days")
    bases = [f"What is the weather in {c}", f"Can you check the weather in {c}", f"How warm is it in {c}",
             f"Tell me the forecast for {c}", f"Is it going to rain in {c}"]
    return ask(r, bases, ex), a, f"the weather in {c}"


def _r_weather(a, r):
    f = a.get("unit") == "fahrenheit"
    t = r.randint(40, 95) if f else r.randint(-5, 35)
    return {"location": a["location"], "temperature": t, "unit": a.get("unit", "celsius"),
            "condition": r.choice(["sunny", "cloudy", "light rain", "windy", "snow", "clear"]),
            "humidity": r.randint(20, 95)}


tool(key="weather", names=["get_weather", "get_current_weather", "fetch_weather", "weather_lookup"],
     held_names=["check_weather", "query_weather_now"], desc="Get the current weather and an optional forecast for a city.",
     params=[P("location", "string", "City name, for example Paris", aliases=("location", "city")),
             P("unit", "string", "Temperature unit", required=False, enum=["celsius", "fahrenheit"]),
             P("days", "integer", "Number of forecast days, 1 to 7", required=False)],
     gen=_g_weather, result=_r_weather,
     answer=lambda a, s: f"It is {s['temperature']} degrees {s['unit']} and {s['condition']} in {s['location']}, with {s['humidity']}% humidity.")


# search issues ---------------------------------------------------------------------------------
def _g_issues(r):
    repo, topic = r.choice(REPOS), r.choice(TOPICS)
    a = {"repo": repo, "query": topic}
    ex = []
    if r.random() < 0.5:
        a["state"] = r.choice(["open", "closed", "all"])
        ex.append(f" ({a['state']} issues)" if a["state"] != "all" else " (open and closed)")
    if r.random() < 0.35:
        a["labels"] = r.sample(LABELS, r.randint(1, 2))
        ex.append(" labeled " + " and ".join(a["labels"]))
    if r.random() < 0.35:
        a["limit"] = r.choice([3, 5, 10, 20])
        ex.append(f", at most {a['limit']} results")
    bases = [f"Find issues about {topic} in {repo}", f"Search {repo} for issues mentioning {topic}",
             f"Are there any issues on {topic} in the {repo} repo"]
    return ask(r, bases, ex), a, f"issues about {topic} in {repo}"


def _r_issues(a, r):
    n = r.randint(0, 3)
    return {"total": n, "issues": [{"number": r.randint(10, 4000), "title": f"{a['query'].capitalize()} {r.choice(['in', 'after', 'during'])} {r.choice(['login', 'deploy', 'export', 'sync', 'startup'])}",
                                    "state": a.get("state", "open") if a.get("state") != "all" else r.choice(["open", "closed"])} for _ in range(n)]}


def _a_issues(a, s):
    if s["total"] == 0:
        return f"I found no matching issues about {a['query']} in {a['repo']}."
    items = "; ".join(f"#{i['number']} {i['title']} ({i['state']})" for i in s["issues"])
    return f"I found {s['total']} issue(s) in {a['repo']}: {items}."


tool(key="issues", names=["search_issues", "find_issues", "list_issues"], held_names=["query_issue_tracker", "lookup_tickets"],
     desc="Search the issue tracker of a repository.",
     params=[P("repo", "string", "Repository in owner/name form", aliases=("repo", "repository")),
             P("query", "string", "Search text"),
             P("state", "string", "Issue state filter", required=False, enum=["open", "closed", "all"]),
             P("labels", "array", "Only issues with all of these labels", required=False, items={"type": "string"}),
             P("limit", "integer", "Maximum number of results", required=False, aliases=("limit", "max_results"))],
     gen=_g_issues, result=_r_issues, answer=_a_issues)


# create file -----------------------------------------------------------------------------------
def _g_create(r):
    path = f"{r.choice(FILE_DIRS)}/{r.choice(FILE_NAMES)}"
    content = r.choice(FILE_CONTENTS)
    a = {"path": path, "content": content}
    ex = []
    if r.random() < 0.4:
        a["overwrite"] = r.random() < 0.6
        ex.append(", overwriting it if it exists" if a["overwrite"] else ", but do not overwrite an existing file")
    show = content.replace("\n", " / ")
    bases = [f"Create a file {path} containing: {show}", f"Please write a new file at {path} with the text \"{show}\"",
             f"Make {path} with this content: {show}"]
    return ask(r, bases, ex, end="."), a, f"creating {path}"


tool(key="create_file", names=["create_file", "write_file", "make_file"], held_names=["new_file", "save_text_file"],
     desc="Create a text file with the given content.",
     params=[P("path", "string", "Path of the file to create", aliases=("path", "file_path", "filename")),
             P("content", "string", "Text to write into the file"),
             P("overwrite", "boolean", "Replace the file if it already exists", required=False)],
     gen=_g_create, result=lambda a, r: {"ok": True, "path": a["path"], "bytes_written": len(a["content"].encode())},
     answer=lambda a, s: f"Created {s['path']} ({s['bytes_written']} bytes).")


# run tests -------------------------------------------------------------------------------------
def _g_tests(r):
    path = r.choice(["tests/", "tests/test_api.py", "tests/unit", "tests/test_models.py", "test/", "tests/integration"])
    a = {"path": path}
    ex = []
    if r.random() < 0.4:
        a["verbose"] = r.random() < 0.7
        ex.append(" with verbose output" if a["verbose"] else " quietly")
    if r.random() < 0.3:
        a["markers"] = r.sample(["slow", "db", "network", "smoke", "gpu"], r.randint(1, 2))
        ex.append(" only for the " + " and ".join(a["markers"]) + " markers")
    if r.random() < 0.3:
        a["timeout"] = r.choice([30, 60, 120, 300, 90.5, 45.0])
        ex.append(f" with a timeout of {a['timeout']} seconds")
    bases = [f"Run the tests in {path}", f"Please execute the test suite under {path}", f"Can you run {path} tests"]
    return ask(r, bases, ex, end=r.choice([".", "?"])), a, f"running the tests in {path}"


def _r_tests(a, r):
    total = r.randint(3, 40)
    failed = r.choice([0, 0, 0, 1, 2])
    return {"passed": total - failed, "failed": failed, "duration_s": round(r.uniform(0.2, 30), 2)}


tool(key="run_tests", names=["run_tests", "run_test_suite", "execute_tests"], held_names=["start_tests", "pytest_run"],
     desc="Run the project test suite and report the results.",
     params=[P("path", "string", "Test file or directory", aliases=("path", "target")),
             P("verbose", "boolean", "Print every test name", required=False),
             P("markers", "array", "Only run tests with these markers", required=False, items={"type": "string"}),
             P("timeout", "number", "Timeout in seconds", required=False)],
     gen=_g_tests, result=_r_tests,
     answer=lambda a, s: f"{s['passed']} tests passed and {s['failed']} failed in {s['duration_s']} seconds." + (" Some tests need attention." if s["failed"] else " Everything is green."))


# schedule meeting ------------------------------------------------------------------------------
def _g_meeting(r):
    title = r.choice(MEETINGS)
    people = [email(r) for _ in range(r.randint(1, 3))]
    d, t = date(r), clock(r)
    dur = r.choice([15, 30, 45, 60, 90])
    a = {"title": title, "attendees": people, "start_time": f"{d}T{t}", "duration_minutes": dur}
    ex = []
    if r.random() < 0.3:
        a["recurring"] = r.random() < 0.7
        ex.append(", repeating weekly" if a["recurring"] else ", just once")
    bases = [f"Schedule a {dur} minute meeting called {title} with {', '.join(people)} on {d} at {t}",
             f"Set up \"{title}\" on {d} at {t} for {dur} minutes and invite {', '.join(people)}",
             f"Book {title} with {' and '.join(people)} at {t} on {d}, {dur} minutes long"]
    return ask(r, bases, ex, end="."), a, f"scheduling {title}"


tool(key="meeting", names=["schedule_meeting", "create_meeting", "book_meeting"], held_names=["add_calendar_event", "plan_meeting"],
     desc="Schedule a meeting on the calendar and invite attendees.",
     params=[P("title", "string", "Meeting title", aliases=("title", "subject")),
             P("attendees", "array", "Email addresses of the attendees", items={"type": "string"}),
             P("start_time", "string", "Start time in ISO format, YYYY-MM-DDTHH:MM"),
             P("duration_minutes", "integer", "Length of the meeting in minutes", aliases=("duration_minutes", "duration")),
             P("recurring", "boolean", "Repeat weekly", required=False)],
     gen=_g_meeting, result=lambda a, r: {"status": "scheduled", "meeting_id": f"m-{r.randint(1000, 9999)}", "invited": len(a["attendees"])},
     answer=lambda a, s: f"The meeting is scheduled (id {s['meeting_id']}) and {s['invited']} attendee(s) were invited.")


# send email ------------------------------------------------------------------------------------
def _g_email(r):
    to = [email(r) for _ in range(r.randint(1, 2))]
    subj = r.choice(["Status update", "Lunch on Friday", "Invoice question", "Release notes", "Quick question", "Meeting notes"])
    body = r.choice(["The release is ready for review.", "Can we move lunch to 1pm?", "Please find the numbers attached.",
                     "The deploy finished without errors.", "Are you free tomorrow afternoon?", "Thanks for your help today."])
    a = {"to": to, "subject": subj, "body": body}
    ex = []
    if r.random() < 0.35:
        a["priority"] = r.choice(["low", "normal", "high"])
        ex.append(f" Mark it as {a['priority']} priority.")
    bases = [f"Send an email to {' and '.join(to)} with subject \"{subj}\" saying: {body}",
             f"Email {', '.join(to)}. Subject: {subj}. Message: {body}"]
    return r.choice(bases) + "".join(ex), a, f"emailing {', '.join(to)}"


tool(key="email", names=["send_email", "email_send", "compose_email"], held_names=["dispatch_mail", "send_message_email"],
     desc="Send an email message.",
     params=[P("to", "array", "Recipient email addresses", items={"type": "string"}, aliases=("to", "recipients")),
             P("subject", "string", "Subject line"),
             P("body", "string", "Message text"),
             P("priority", "string", "Message priority", required=False, enum=["low", "normal", "high"])],
     gen=_g_email, result=lambda a, r: {"sent": True, "message_id": f"<{r.randint(10000, 99999)}@mail>"},
     answer=lambda a, s: f"The email to {', '.join(a['to'])} was sent.")


# currency --------------------------------------------------------------------------------------
def _g_currency(r):
    f, t = r.sample(CURRENCIES, 2)
    amt = r.choice([r.randint(5, 5000), round(r.uniform(1, 999), 2)])
    a = {"amount": amt, "from_currency": f, "to_currency": t}
    bases = [f"Convert {amt} {f} to {t}", f"How much is {amt} {f} in {t}", f"What do {amt} {f} come to in {t}"]
    return ask(r, bases, end=r.choice(["?", "."])), a, f"converting {amt} {f} to {t}"


def _r_currency(a, r):
    rate = round(r.uniform(0.05, 20), 4)
    return {"rate": rate, "converted": round(a["amount"] * rate, 2), "currency": a["to_currency"]}


tool(key="currency", names=["convert_currency", "currency_convert", "exchange_money"], held_names=["fx_convert", "calculate_exchange"],
     desc="Convert an amount between two currencies at the current rate.",
     params=[P("amount", "number", "Amount to convert"),
             P("from_currency", "string", "Source currency code, for example USD", aliases=("from_currency", "source")),
             P("to_currency", "string", "Target currency code", aliases=("to_currency", "target"))],
     gen=_g_currency, result=_r_currency,
     answer=lambda a, s: f"{a['amount']} {a['from_currency']} is {s['converted']} {s['currency']} (rate {s['rate']}).")


# stock -----------------------------------------------------------------------------------------
def _g_stock(r):
    s = r.choice(SYMBOLS)
    a = {"symbol": s}
    ex = []
    if r.random() < 0.3:
        a["exchange"] = r.choice(["NASDAQ", "NYSE", "XETRA"])
        ex.append(f" on {a['exchange']}")
    return ask(r, [f"What is the stock price of {s}", f"How is {s} trading today", f"Get me the latest {s} share price"], ex), a, f"the price of {s}"


tool(key="stock", names=["get_stock_price", "stock_quote", "fetch_stock_price"], held_names=["lookup_share_price", "quote_ticker"],
     desc="Get the latest trading price of a stock.",
     params=[P("symbol", "string", "Ticker symbol", aliases=("symbol", "ticker")),
             P("exchange", "string", "Stock exchange", required=False, enum=["NASDAQ", "NYSE", "XETRA"])],
     gen=_g_stock, result=lambda a, r: {"symbol": a["symbol"], "price": round(r.uniform(10, 900), 2), "change_pct": round(r.uniform(-5, 5), 2)},
     answer=lambda a, s: f"{s['symbol']} is trading at {s['price']} ({s['change_pct']:+}% today).")


# reminder --------------------------------------------------------------------------------------
def _g_reminder(r):
    msg = r.choice(["call the dentist", "take out the trash", "join the standup", "water the plants", "check the oven",
                    "submit the report", "stretch", "pick up the kids"])
    m = r.choice([5, 10, 15, 20, 30, 45, 60, 90, 120])
    a = {"message": msg, "minutes_from_now": m}
    return ask(r, [f"Remind me to {msg} in {m} minutes", f"Set a reminder in {m} minutes to {msg}",
                   f"In {m} minutes, remind me to {msg}"], end="."), a, f"a reminder to {msg}"


tool(key="reminder", names=["set_reminder", "create_reminder", "add_reminder"], held_names=["remind_me", "schedule_alert"],
     desc="Set a reminder that fires after a delay.",
     params=[P("message", "string", "What to be reminded about", aliases=("message", "text")),
             P("minutes_from_now", "integer", "Delay in minutes", aliases=("minutes_from_now", "delay_minutes"))],
     gen=_g_reminder, result=lambda a, r: {"ok": True, "reminder_id": r.randint(100, 999)},
     answer=lambda a, s: f"Done, I will remind you to {a['message']} in {a['minutes_from_now']} minutes.")


# translate -------------------------------------------------------------------------------------
def _g_translate(r):
    text, lang = r.choice(PHRASES), r.choice(LANGS)
    a = {"text": text, "target_language": lang}
    ex = []
    if r.random() < 0.3:
        a["formal"] = r.random() < 0.5
        ex.append(" using formal language" if a["formal"] else " in a casual tone")
    return ask(r, [f"Translate \"{text}\" into {lang}", f"How do you say \"{text}\" in {lang}"], ex), a, f"translating into {lang}"


tool(key="translate", names=["translate_text", "translate", "text_translate"], held_names=["localize_text", "convert_language"],
     desc="Translate text into another language.",
     params=[P("text", "string", "Text to translate"),
             P("target_language", "string", "Language to translate into", aliases=("target_language", "language")),
             P("formal", "boolean", "Use a formal register", required=False)],
     gen=_g_translate, result=lambda a, r: {"translation": f"[{a['target_language']}] {a['text']}"},
     answer=lambda a, s: f"In {a['target_language']}: {s['translation']}")


# database --------------------------------------------------------------------------------------
def _g_db(r):
    db = r.choice(DATABASES)
    tbl, col = r.choice(TABLES)
    sql = r.choice([f"SELECT COUNT(*) FROM {tbl}", f"SELECT {col}, COUNT(*) FROM {tbl} GROUP BY {col}",
                    f"SELECT * FROM {tbl} ORDER BY {col} DESC LIMIT 5", f"SELECT AVG({col}) FROM {tbl}"])
    a = {"sql": sql, "database": db}
    ex = []
    if r.random() < 0.35:
        a["max_rows"] = r.choice([10, 50, 100])
        ex.append(f" (return at most {a['max_rows']} rows)")
    return ask(r, [f"Run this query on the {db} database: {sql}", f"In the {db} database, execute {sql}"], ex, end="."), a, f"querying {db}"


tool(key="sql", names=["query_database", "run_sql", "execute_query"], held_names=["sql_query", "db_select"],
     desc="Run a read-only SQL query on a database.",
     params=[P("sql", "string", "SQL statement", aliases=("sql", "query")),
             P("database", "string", "Database name", aliases=("database", "db")),
             P("max_rows", "integer", "Row limit", required=False)],
     gen=_g_db, result=lambda a, r: {"rows": [[r.randint(1, 5000)]], "row_count": 1},
     answer=lambda a, s: f"The query returned {s['row_count']} row: {s['rows'][0][0]}.")


# resize image ----------------------------------------------------------------------------------
def _g_resize(r):
    p = f"images/{r.choice(['logo', 'photo', 'banner', 'avatar', 'chart'])}.{r.choice(['png', 'jpg'])}"
    w, h = r.choice([(64, 64), (128, 128), (800, 600), (1024, 768), (1920, 1080), (300, 200)])
    a = {"path": p, "width": w, "height": h}
    ex = []
    if r.random() < 0.4:
        a["keep_aspect"] = r.random() < 0.5
        ex.append(" and keep the aspect ratio" if a["keep_aspect"] else " without keeping the aspect ratio")
    return ask(r, [f"Resize {p} to {w}x{h}", f"Make {p} {w} by {h} pixels"], ex, end="."), a, f"resizing {p}"


tool(key="resize", names=["resize_image", "image_resize", "scale_image"], held_names=["shrink_picture", "rescale_photo"],
     desc="Resize an image file.",
     params=[P("path", "string", "Image path", aliases=("path", "image")),
             P("width", "integer", "New width in pixels"), P("height", "integer", "New height in pixels"),
             P("keep_aspect", "boolean", "Preserve the aspect ratio", required=False)],
     gen=_g_resize, result=lambda a, r: {"ok": True, "output": a["path"].replace(".", "_resized.")},
     answer=lambda a, s: f"Resized image saved to {s['output']}.")


# flights ---------------------------------------------------------------------------------------
def _g_flight(r):
    o, d = r.sample(CITIES, 2)
    day = date(r)
    n = r.randint(1, 4)
    cabin = r.choice(["economy", "premium", "business", "first"])
    a = {"origin": o, "destination": d, "date": day, "passengers": n, "cabin": cabin}
    return ask(r, [f"Book a {cabin} flight from {o} to {d} on {day} for {n} passenger{'s' if n > 1 else ''}",
                   f"I need {n} {cabin} seat{'s' if n > 1 else ''} from {o} to {d} on {day}"], end="."), a, f"a flight from {o} to {d}"


tool(key="flight", names=["book_flight", "reserve_flight", "flight_booking"], held_names=["purchase_airfare", "order_plane_ticket"],
     desc="Book a flight for one or more passengers.",
     params=[P("origin", "string", "Departure city", aliases=("origin", "from_city")),
             P("destination", "string", "Arrival city", aliases=("destination", "to_city")),
             P("date", "string", "Travel date YYYY-MM-DD"), P("passengers", "integer", "Number of passengers"),
             P("cabin", "string", "Cabin class", enum=["economy", "premium", "business", "first"])],
     gen=_g_flight, result=lambda a, r: {"confirmation": f"{r.choice('ABCDEFGHJK')}{r.randint(10000, 99999)}", "price": r.randint(90, 3000) * a["passengers"]},
     answer=lambda a, s: f"Booked: {a['origin']} to {a['destination']} on {a['date']}, confirmation {s['confirmation']}, total {s['price']}.")


# package tracking ------------------------------------------------------------------------------
def _g_track(r):
    num = f"{r.choice(['1Z', 'TRK', 'JD'])}{r.randint(100000, 999999)}"
    a = {"tracking_number": num}
    ex = []
    if r.random() < 0.5:
        a["carrier"] = r.choice(CARRIERS)
        ex.append(f" (it is a {a['carrier'].upper()} shipment)")
    return ask(r, [f"Where is my package {num}", f"Track package {num}", f"What is the status of shipment {num}"], ex), a, f"tracking {num}"


tool(key="track", names=["track_package", "package_status", "track_shipment"], held_names=["locate_parcel", "shipment_lookup"],
     desc="Get the delivery status of a package.",
     params=[P("tracking_number", "string", "Tracking number", aliases=("tracking_number", "tracking_id")),
             P("carrier", "string", "Shipping carrier", required=False, enum=CARRIERS)],
     gen=_g_track, result=lambda a, r: {"status": r.choice(["in transit", "delivered", "out for delivery", "label created"]), "eta": date(r)},
     answer=lambda a, s: f"Package {a['tracking_number']} is {s['status']}; expected {s['eta']}.")


# thermostat ------------------------------------------------------------------------------------
def _g_thermo(r):
    room = r.choice(ROOMS)
    t = r.choice([18, 19, 20, 21, 22, 23, 20.5, 21.5, 19.5])
    mode = r.choice(["heat", "cool", "auto"])
    a = {"room": room, "temperature": t, "mode": mode}
    return ask(r, [f"Set the {room} to {t} degrees in {mode} mode", f"Please {mode} the {room} to {t} degrees",
                   f"Change the {room} thermostat to {t}, mode {mode}"], end="."), a, f"the {room} thermostat"


tool(key="thermostat", names=["set_thermostat", "thermostat_set", "adjust_temperature"], held_names=["control_heating", "climate_set"],
     desc="Set the target temperature and mode of a room thermostat.",
     params=[P("room", "string", "Room name", aliases=("room", "zone")), P("temperature", "number", "Target temperature in Celsius"),
             P("mode", "string", "Operating mode", enum=["heat", "cool", "auto"])],
     gen=_g_thermo, result=lambda a, r: {"ok": True, "current": round(a["temperature"] + r.uniform(-3, 3), 1)},
     answer=lambda a, s: f"The {a['room']} is set to {a['temperature']} degrees ({a['mode']}); it is {s['current']} now.")


# tickets ---------------------------------------------------------------------------------------
def _g_ticket(r):
    topic = r.choice(TOPICS)
    title = f"{topic.capitalize()} in {r.choice(SERVICES)}"
    pr = r.choice(["low", "medium", "high", "critical"])
    a = {"title": title, "description": f"Users report a {topic}. Needs investigation.", "priority": pr}
    ex = []
    if r.random() < 0.5:
        a["tags"] = r.sample(LABELS, r.randint(1, 3))
        ex.append(" Tag it " + ", ".join(a["tags"]) + ".")
    if r.random() < 0.3:
        a["assignee"] = r.choice(PEOPLE)
        ex.append(f" Assign it to {a['assignee']}.")
    return (f"Open a {pr} priority ticket titled \"{title}\": users report a {topic}." + "".join(ex)), a, f"a ticket about {topic}"


tool(key="ticket", names=["create_ticket", "open_ticket", "file_bug"], held_names=["report_incident", "new_issue"],
     desc="Create a ticket in the bug tracker.",
     params=[P("title", "string", "Short title"), P("description", "string", "Details of the problem"),
             P("priority", "string", "Priority", enum=["low", "medium", "high", "critical"]),
             P("tags", "array", "Tags", required=False, items={"type": "string"}),
             P("assignee", "string", "Username of the assignee", required=False)],
     gen=_g_ticket, result=lambda a, r: {"id": f"TICKET-{r.randint(100, 9999)}", "url": f"https://tracker.example.com/{r.randint(100, 9999)}"},
     answer=lambda a, s: f"Created {s['id']} ({a['priority']} priority): {s['url']}")


# scale deployment ------------------------------------------------------------------------------
def _g_scale(r):
    svc = r.choice(SERVICES)
    n = r.randint(0, 12)
    a = {"name": svc, "replicas": n}
    ex = []
    if r.random() < 0.5:
        a["namespace"] = r.choice(NAMESPACES)
        ex.append(f" in the {a['namespace']} namespace")
    return ask(r, [f"Scale {svc} to {n} replicas", f"Set the {svc} deployment to {n} replicas", f"Run {n} replicas of {svc}"], ex, end="."), a, f"scaling {svc}"


tool(key="scale", names=["scale_deployment", "set_replicas", "scale_service"], held_names=["resize_deployment", "k8s_scale"],
     desc="Change the number of replicas of a Kubernetes deployment.",
     params=[P("name", "string", "Deployment name", aliases=("name", "deployment")), P("replicas", "integer", "Desired replica count"),
             P("namespace", "string", "Kubernetes namespace", required=False)],
     gen=_g_scale, result=lambda a, r: {"previous": r.randint(1, 8), "replicas": a["replicas"]},
     answer=lambda a, s: f"{a['name']} scaled from {s['previous']} to {s['replicas']} replicas.")


# loan ------------------------------------------------------------------------------------------
def _g_loan(r):
    p = r.choice([50000, 120000, 250000, 300000, 15000, 420000])
    rate = r.choice([3.5, 4.25, 5.0, 6.1, 2.9, 7.25])
    y = r.choice([5, 10, 15, 20, 25, 30])
    a = {"principal": p, "annual_rate": rate, "years": y}
    return ask(r, [f"What is the monthly payment on a {p} loan at {rate}% over {y} years",
                   f"Calculate the payment for borrowing {p} at {rate} percent for {y} years"]), a, "a loan payment"


def _r_loan(a, r):
    i = a["annual_rate"] / 1200
    n = a["years"] * 12
    m = a["principal"] * i / (1 - (1 + i) ** -n)
    return {"monthly_payment": round(m, 2), "total_interest": round(m * n - a["principal"], 2)}


tool(key="loan", names=["calculate_loan_payment", "loan_calculator", "compute_mortgage"], held_names=["mortgage_payment", "amortize_loan"],
     desc="Compute the monthly payment of a fixed-rate loan.",
     params=[P("principal", "number", "Loan amount", aliases=("principal", "amount")), P("annual_rate", "number", "Annual interest rate in percent"),
             P("years", "integer", "Loan term in years")],
     gen=_g_loan, result=_r_loan,
     answer=lambda a, s: f"The monthly payment is {s['monthly_payment']}, with {s['total_interest']} interest in total.")


# web search ------------------------------------------------------------------------------------
def _g_search(r):
    q = r.choice(KEYWORDS)
    a = {"query": q}
    ex = []
    if r.random() < 0.4:
        a["num_results"] = r.choice([3, 5, 10])
        ex.append(f" and give me the top {a['num_results']} results")
    if r.random() < 0.2:
        a["safe_search"] = r.random() < 0.5
        ex.append(" with safe search on" if a["safe_search"] else " with safe search off")
    return ask(r, [f"Search the web for {q}", f"Look up {q} online", f"Find pages about {q}"], ex, end="."), a, f"searching for {q}"


tool(key="search", names=["search_web", "web_search", "internet_search"], held_names=["google_it", "browse_search"],
     desc="Search the web and return result titles and links.",
     params=[P("query", "string", "Search terms", aliases=("query", "q")), P("num_results", "integer", "Number of results", required=False),
             P("safe_search", "boolean", "Filter explicit results", required=False)],
     gen=_g_search, result=lambda a, r: {"results": [{"title": f"{a['query'].title()} - guide {i + 1}", "url": f"https://site{r.randint(1, 99)}.example.org/{i}"} for i in range(2)]},
     answer=lambda a, s: "Top results: " + "; ".join(f"{x['title']} ({x['url']})" for x in s["results"]) + ".")


# music -----------------------------------------------------------------------------------------
def _g_music(r):
    song, artist = r.choice(SONGS)
    a = {"song": song, "artist": artist}
    ex = []
    if r.random() < 0.3:
        a["shuffle"] = r.random() < 0.5
        ex.append(" on shuffle" if a["shuffle"] else " without shuffle")
    if r.random() < 0.35:
        a["volume"] = r.choice([20, 30, 40, 50, 70, 80])
        ex.append(f" at volume {a['volume']}")
    return ask(r, [f"Play {song} by {artist}", f"Put on {song} from {artist}"], ex, end="."), a, f"playing {song}"


tool(key="music", names=["play_music", "play_song", "start_playback"], held_names=["queue_track", "music_play"],
     desc="Play a song on the speaker.",
     params=[P("song", "string", "Song title", aliases=("song", "track")), P("artist", "string", "Artist name"),
             P("shuffle", "boolean", "Shuffle the queue", required=False),
             P("volume", "integer", "Volume from 0 to 100", required=False)],
     gen=_g_music, result=lambda a, r: {"playing": True, "duration_s": r.randint(150, 320)},
     answer=lambda a, s: f"Now playing {a['song']} by {a['artist']}.")


# food order (array of objects) -----------------------------------------------------------------
def _g_food(r):
    rest = r.choice(RESTAURANTS)
    items = [{"name": f, "quantity": r.randint(1, 3)} for f in r.sample(FOODS, r.randint(1, 3))]
    deliv = r.random() < 0.6
    a = {"restaurant": rest, "items": items, "delivery": deliv}
    desc = ", ".join(f"{i['quantity']} {i['name']}" for i in items)
    return ask(r, [f"Order {desc} from {rest}", f"Get me {desc} from {rest}"], [" for delivery" if deliv else " for pickup"], end="."), a, f"ordering from {rest}"


tool(key="food", names=["order_food", "place_food_order", "food_delivery_order"], held_names=["order_takeout", "request_meal"],
     desc="Order food from a restaurant.",
     params=[P("restaurant", "string", "Restaurant name"),
             P("items", "array", "Dishes to order",
               items={"type": "object", "properties": {"name": {"type": "string"}, "quantity": {"type": "integer"}}, "required": ["name", "quantity"]}),
             P("delivery", "boolean", "Deliver instead of pickup")],
     gen=_g_food, result=lambda a, r: {"order_id": r.randint(1000, 9999), "eta_minutes": r.randint(15, 60), "total": round(r.uniform(8, 80), 2)},
     answer=lambda a, s: f"Order {s['order_id']} placed at {a['restaurant']}, total {s['total']}, ready in about {s['eta_minutes']} minutes.")


# user profile ----------------------------------------------------------------------------------
def _g_profile(r):
    uid = r.randint(1, 99999)
    a = {"user_id": uid}
    ex = []
    if r.random() < 0.4:
        a["include_history"] = r.random() < 0.6
        ex.append(" including their order history" if a["include_history"] else " without history")
    return ask(r, [f"Look up user {uid}", f"Show me the profile of user id {uid}", f"Who is user {uid}"], ex), a, f"user {uid}"


tool(key="profile", names=["get_user_profile", "fetch_user", "lookup_user"], held_names=["user_info", "read_account"],
     desc="Fetch a user profile by numeric id.",
     params=[P("user_id", "integer", "Numeric user id", aliases=("user_id", "id")),
             P("include_history", "boolean", "Include order history", required=False)],
     gen=_g_profile, result=lambda a, r: {"id": a["user_id"], "name": r.choice(PEOPLE).capitalize(), "plan": r.choice(["free", "pro", "team"])},
     answer=lambda a, s: f"User {s['id']} is {s['name']} on the {s['plan']} plan.")


# update config (free-form object) --------------------------------------------------------------
def _g_config(r):
    svc = r.choice(SERVICES)
    opts = [("max_connections", r.choice([50, 100, 200])), ("debug", r.random() < 0.5), ("log_level", r.choice(["info", "debug", "warn"])),
            ("timeout_s", r.choice([5, 10, 30])), ("retries", r.randint(1, 5)), ("cache_ttl", r.choice([60, 300, 3600]))]
    chosen = dict(r.sample(opts, r.randint(1, 3)))
    a = {"service": svc, "settings": chosen}
    desc = " and ".join(f"{k} to {json.dumps(v)}" for k, v in chosen.items())
    return ask(r, [f"Update the {svc} config: set {desc}", f"For {svc}, change {desc}"], end="."), a, f"updating {svc} settings"


tool(key="config", names=["update_config", "set_config", "patch_settings"], held_names=["configure_service", "apply_settings"],
     desc="Update configuration settings of a service.",
     params=[P("service", "string", "Service name"),
             P("settings", "object", "Settings to change, as key and value pairs")],
     gen=_g_config, result=lambda a, r: {"updated": sorted(a["settings"]), "restart_required": r.random() < 0.5},
     answer=lambda a, s: f"Updated {', '.join(s['updated'])} for {a['service']}." + (" A restart is required." if s["restart_required"] else ""))


# pull requests ---------------------------------------------------------------------------------
def _g_prs(r):
    repo = r.choice(REPOS)
    st = r.choice(["open", "closed", "merged"])
    a = {"repo": repo, "state": st}
    ex = []
    if r.random() < 0.4:
        a["author"] = r.choice(PEOPLE)
        ex.append(f" by {a['author']}")
    return ask(r, [f"List the {st} pull requests in {repo}", f"Show {st} PRs for {repo}"], ex, end="."), a, f"pull requests in {repo}"


tool(key="prs", names=["list_pull_requests", "get_pull_requests", "find_prs"], held_names=["show_merge_requests", "pr_list"],
     desc="List pull requests of a repository.",
     params=[P("repo", "string", "Repository in owner/name form", aliases=("repo", "repository")),
             P("state", "string", "Pull request state", enum=["open", "closed", "merged"]),
             P("author", "string", "Filter by author", required=False)],
     gen=_g_prs, result=lambda a, r: {"pull_requests": [{"number": r.randint(1, 900), "title": r.choice(["Fix typo", "Add caching", "Bump deps", "Refactor parser", "Improve logging"])} for _ in range(r.randint(1, 3))]},
     answer=lambda a, s: f"{len(s['pull_requests'])} {a['state']} PR(s): " + "; ".join(f"#{p['number']} {p['title']}" for p in s["pull_requests"]) + ".")


# statistics (array of numbers, array of enums) -------------------------------------------------
def _g_stats(r):
    nums = [r.choice([r.randint(1, 100), round(r.uniform(0, 50), 1)]) for _ in range(r.randint(3, 6))]
    mets = r.sample(["mean", "median", "min", "max", "stdev"], r.randint(1, 3))
    a = {"numbers": nums, "metrics": mets}
    return ask(r, [f"Compute the {' and '.join(mets)} of {', '.join(map(str, nums))}",
                   f"What are the {', '.join(mets)} for these values: {', '.join(map(str, nums))}"]), a, "statistics"


def _r_stats(a, r):
    import statistics as st
    fn = {"mean": st.mean, "median": st.median, "min": min, "max": max, "stdev": st.stdev}
    return {m: round(fn[m](a["numbers"]), 3) for m in a["metrics"]}


tool(key="stats", names=["compute_statistics", "calc_stats", "describe_numbers"], held_names=["summarize_numbers", "number_stats"],
     desc="Compute summary statistics of a list of numbers.",
     params=[P("numbers", "array", "Values", items={"type": "number"}, aliases=("numbers", "values")),
             P("metrics", "array", "Statistics to compute", items={"type": "string", "enum": ["mean", "median", "min", "max", "stdev"]})],
     gen=_g_stats, result=_r_stats,
     answer=lambda a, s: "Results: " + ", ".join(f"{k} = {v}" for k, v in s.items()) + ".")


# news ------------------------------------------------------------------------------------------
def _g_news(r):
    t = r.choice(NEWS_TOPICS)
    a = {"topic": t}
    ex = []
    if r.random() < 0.4:
        a["country"] = r.choice(COUNTRIES)
        ex.append(f" from {a['country'].upper()}")
    if r.random() < 0.4:
        a["limit"] = r.choice([3, 5])
        ex.append(f", {a['limit']} headlines")
    return ask(r, [f"What is the latest {t} news", f"Get me {t} headlines", f"Any news about {t} today"], ex), a, f"{t} news"


tool(key="news", names=["get_news", "fetch_headlines", "latest_news"], held_names=["news_feed", "read_headlines"],
     desc="Get recent news headlines for a topic.",
     params=[P("topic", "string", "News topic", aliases=("topic", "category")),
             P("country", "string", "Two letter country code", required=False),
             P("limit", "integer", "Number of headlines", required=False)],
     gen=_g_news, result=lambda a, r: {"headlines": [f"{a['topic'].capitalize()} story {i + 1}: {r.choice(['new record set', 'big announcement', 'study published', 'market reacts'])}" for i in range(2)]},
     answer=lambda a, s: "Headlines: " + "; ".join(s["headlines"]) + ".")


# restaurants -----------------------------------------------------------------------------------
def _g_rest(r):
    c, cu = r.choice(CITIES), r.choice(CUISINES)
    a = {"city": c, "cuisine": cu}
    ex = []
    if r.random() < 0.4:
        a["max_price"] = r.randint(1, 4)
        ex.append(f" with price level at most {a['max_price']}")
    if r.random() < 0.3:
        a["open_now"] = True
        ex.append(" that are open now")
    return ask(r, [f"Find {cu} restaurants in {c}", f"Recommend a {cu} place in {c}"], ex, end=r.choice([".", "?"])), a, f"{cu} restaurants in {c}"


tool(key="restaurants", names=["find_restaurants", "search_restaurants", "restaurant_finder"], held_names=["nearby_dining", "locate_eateries"],
     desc="Find restaurants in a city.",
     params=[P("city", "string", "City name", aliases=("city", "location")), P("cuisine", "string", "Type of food", enum=CUISINES),
             P("max_price", "integer", "Price level from 1 to 4", required=False), P("open_now", "boolean", "Only open restaurants", required=False)],
     gen=_g_rest, result=lambda a, r: {"results": [{"name": r.choice(RESTAURANTS), "rating": round(r.uniform(3.5, 5), 1)} for _ in range(2)]},
     answer=lambda a, s: "Options: " + "; ".join(f"{x['name']} (rating {x['rating']})" for x in s["results"]) + ".")


# --- tools that only appear in the held-out split ----------------------------------------------
def _g_air(r):
    c = r.choice(CITIES)
    a = {"city": c}
    ex = []
    if r.random() < 0.4:
        a["pollutant"] = r.choice(["pm25", "pm10", "ozone"])
        ex.append(f" ({a['pollutant']} level)")
    return ask(r, [f"How is the air quality in {c}", f"Check the air quality for {c}"], ex), a, f"the air quality in {c}"


tool(key="air", names=["get_air_quality"], held_names=["air_quality_index"], heldout_only=True,
     desc="Get the air quality index for a city.",
     params=[P("city", "string", "City name"), P("pollutant", "string", "Pollutant", required=False, enum=["pm25", "pm10", "ozone"])],
     gen=_g_air, result=lambda a, r: {"aqi": r.randint(5, 180)}, answer=lambda a, s: f"The air quality index in {a['city']} is {s['aqi']}.")


def _g_branch(r):
    repo = r.choice(REPOS)
    old, new = r.sample(["main", "dev", "feature-login", "hotfix", "release-1.2", "wip", "experiment"], 2)
    a = {"repo": repo, "old_name": old, "new_name": new}
    return ask(r, [f"Rename the branch {old} to {new} in {repo}", f"In {repo}, rename {old} to {new}"], end="."), a, f"renaming {old}"


tool(key="branch", names=["rename_branch"], held_names=["git_branch_rename"], heldout_only=True,
     desc="Rename a git branch in a repository.",
     params=[P("repo", "string", "Repository"), P("old_name", "string", "Current branch name"), P("new_name", "string", "New branch name")],
     gen=_g_branch, result=lambda a, r: {"ok": True}, answer=lambda a, s: f"Renamed {a['old_name']} to {a['new_name']} in {a['repo']}.")


def _g_words(r):
    text = r.choice(PHRASES)
    a = {"text": text}
    ex = []
    if r.random() < 0.5:
        a["unique"] = r.random() < 0.5
        ex.append(" counting only unique words" if a["unique"] else "")
    return ask(r, [f"How many words are in \"{text}\"", f"Count the words in \"{text}\""], ex), a, "a word count"


tool(key="words", names=["count_words"], held_names=["word_counter"], heldout_only=True,
     desc="Count the words in a text.",
     params=[P("text", "string", "Input text"), P("unique", "boolean", "Count distinct words only", required=False)],
     gen=_g_words, result=lambda a, r: {"count": len(a["text"].split())}, answer=lambda a, s: f"The text has {s['count']} words.")


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


# ----------------------------------------------------------------------------- typed tools


def train_pool(split):
    return [t for t in TOOLS if not t.heldout_only] if split == "train" else TOOLS


def typed_conversation(r, split):
    think = r.random() < 0.5
    pool = train_pool(split)
    if split == "heldout":  # make the unseen tools appear often enough to measure
        unseen = [t for t in TOOLS if t.heldout_only]
        pool = pool + unseen
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


# ----------------------------------------------------------------------------- main


def make(r, split, bash_frac=0.4):
    while True:
        conv = bash_conversation(r, split) if r.random() < bash_frac else typed_conversation(r, split)
        if conv is not None:
            break
    spans = []
    conv["text"] = render(conv["messages"], conv["tools"], spans=spans)
    conv["spans"] = spans
    return conv


def check_split_disjoint():
    train_names = {n for t in TOOLS if not t.heldout_only for n in t.names}
    held = {n for t in TOOLS for n in t.held_names} | {n for t in TOOLS if t.heldout_only for n in t.names}
    assert not (train_names & held), train_names & held
    allnames = [n for t in TOOLS for n in t.names + t.held_names]
    assert len(allnames) == len(set(allnames)), "duplicate tool alias"
    for t in TOOLS:
        assert all(p.aliases[0] == p.name for p in t.params), (t.key, "first alias must be the canonical name")
    for t in TOOLS:  # keep schemas free of characters some Jinja tojson filters HTML-escape
        s = json.dumps(t.instantiate(random.Random(0), "train")[0])
        assert not any(ch in s for ch in "<>&'"), (t.key, s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--heldout-seed", type=int, default=None, help="default: seed + 1000003")
    ap.add_argument("--n-train", type=int, default=20000)
    ap.add_argument("--n-heldout", type=int, default=300)
    args = ap.parse_args()
    check_split_disjoint()
    os.makedirs(args.out, exist_ok=True)
    hs = args.heldout_seed if args.heldout_seed is not None else args.seed + 1000003
    for split, seed, n in (("train", args.seed, args.n_train), ("heldout", hs, args.n_heldout)):
        r = random.Random(seed)
        path = os.path.join(args.out, f"{split}.jsonl")
        chars = 0
        with open(path, "w") as f:
            for i in range(n):
                conv = make(r, split)
                conv = {"id": f"{split}-{i:06d}", "split": split, **conv}
                chars += len(conv["text"])
                f.write(json.dumps(conv, ensure_ascii=False) + "\n")
        print(f"{split}: {n} conversations, {chars / 1e6:.2f}M chars -> {path}")


if __name__ == "__main__":
    main()
