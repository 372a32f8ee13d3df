"""Hand-written typed tools, part 1 (weather ... resize_image); registered in order."""

from __future__ import annotations

from .pools import (CITIES, DATABASES, FILE_CONTENTS, FILE_DIRS, FILE_NAMES, LABELS, LANGS, MEETINGS,
                    PHRASES, REPOS, SYMBOLS, TABLES, TOPICS, clock, date, email)
from .typed_base import P, ask, tool


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
     desc="Get the current weather and an optional forecast for a city.",
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


tool(key="issues", names=["search_issues", "find_issues", "list_issues"],
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


tool(key="create_file", names=["create_file", "write_file", "make_file"],
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


tool(key="run_tests", names=["run_tests", "run_test_suite", "execute_tests"],
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


tool(key="meeting", names=["schedule_meeting", "create_meeting", "book_meeting"],
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


tool(key="email", names=["send_email", "email_send", "compose_email"],
     desc="Send an email message.",
     params=[P("to", "array", "Recipient email addresses", items={"type": "string"}, aliases=("to", "recipients")),
             P("subject", "string", "Subject line"),
             P("body", "string", "Message text"),
             P("priority", "string", "Message priority", required=False, enum=["low", "normal", "high"])],
     gen=_g_email, result=lambda a, r: {"sent": True, "message_id": f"<{r.randint(10000, 99999)}@mail>"},
     answer=lambda a, s: f"The email to {', '.join(a['to'])} was sent.")


# stock -----------------------------------------------------------------------------------------
def _g_stock(r):
    s = r.choice(SYMBOLS)
    a = {"symbol": s}
    ex = []
    if r.random() < 0.3:
        a["exchange"] = r.choice(["NASDAQ", "NYSE", "XETRA"])
        ex.append(f" on {a['exchange']}")
    return ask(r, [f"What is the stock price of {s}", f"How is {s} trading today", f"Get me the latest {s} share price"], ex), a, f"the price of {s}"


tool(key="stock", names=["get_stock_price", "stock_quote", "fetch_stock_price"],
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


tool(key="reminder", names=["set_reminder", "create_reminder", "add_reminder"],
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


tool(key="translate", names=["translate_text", "translate", "text_translate"],
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


tool(key="sql", names=["query_database", "run_sql", "execute_query"],
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


tool(key="resize", names=["resize_image", "image_resize", "scale_image"],
     desc="Resize an image file.",
     params=[P("path", "string", "Image path", aliases=("path", "image")),
             P("width", "integer", "New width in pixels"), P("height", "integer", "New height in pixels"),
             P("keep_aspect", "boolean", "Preserve the aspect ratio", required=False)],
     gen=_g_resize, result=lambda a, r: {"ok": True, "output": a["path"].replace(".", "_resized.")},
     answer=lambda a, s: f"Resized image saved to {s['output']}.")
