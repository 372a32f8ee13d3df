"""Hand-written typed tools, part 2 (book_flight ... find_restaurants); registered in order."""

from __future__ import annotations

import json

from .pools import (CARRIERS, CITIES, COUNTRIES, CUISINES, FOODS, KEYWORDS, LABELS, NAMESPACES, NEWS_TOPICS,
                    PEOPLE, REPOS, RESTAURANTS, ROOMS, SERVICES, SONGS, TOPICS, date)
from .typed_base import P, ask, tool


# flights ---------------------------------------------------------------------------------------
def _g_flight(r):
    o, d = r.sample(CITIES, 2)
    day = date(r)
    n = r.randint(1, 4)
    cabin = r.choice(["economy", "premium", "business", "first"])
    a = {"origin": o, "destination": d, "date": day, "passengers": n, "cabin": cabin}
    return ask(r, [f"Book a {cabin} flight from {o} to {d} on {day} for {n} passenger{'s' if n > 1 else ''}",
                   f"I need {n} {cabin} seat{'s' if n > 1 else ''} from {o} to {d} on {day}"], end="."), a, f"a flight from {o} to {d}"


tool(key="flight", names=["book_flight", "reserve_flight", "flight_booking"],
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


tool(key="track", names=["track_package", "package_status", "track_shipment"],
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


tool(key="thermostat", names=["set_thermostat", "thermostat_set", "adjust_temperature"],
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


tool(key="ticket", names=["create_ticket", "open_ticket", "file_bug"],
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


tool(key="scale", names=["scale_deployment", "set_replicas", "scale_service"],
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


tool(key="loan", names=["calculate_loan_payment", "loan_calculator", "compute_mortgage"],
     desc="Compute the monthly payment of a fixed-rate loan.",
     params=[P("principal", "number", "Loan amount", aliases=("principal", "loan_principal")), P("annual_rate", "number", "Annual interest rate in percent"),
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


tool(key="search", names=["search_web", "web_search", "internet_search"],
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


tool(key="music", names=["play_music", "play_song", "start_playback"],
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


tool(key="food", names=["order_food", "place_food_order", "food_delivery_order"],
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


tool(key="profile", names=["get_user_profile", "fetch_user", "lookup_user"],
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


tool(key="config", names=["update_config", "set_config", "patch_settings"],
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


tool(key="prs", names=["list_pull_requests", "get_pull_requests", "find_prs"],
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


tool(key="stats", names=["compute_statistics", "calc_stats", "describe_numbers"],
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


tool(key="news", names=["get_news", "fetch_headlines", "latest_news"],
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


tool(key="restaurants", names=["find_restaurants", "search_restaurants", "restaurant_finder"],
     desc="Find restaurants in a city.",
     params=[P("city", "string", "City name", aliases=("city", "location")), P("cuisine", "string", "Type of food", enum=CUISINES),
             P("max_price", "integer", "Price level from 1 to 4", required=False), P("open_now", "boolean", "Only open restaurants", required=False)],
     gen=_g_rest, result=lambda a, r: {"results": [{"name": r.choice(RESTAURANTS), "rating": round(r.uniform(3.5, 5), 1)} for _ in range(2)]},
     answer=lambda a, s: "Options: " + "; ".join(f"{x['name']} (rating {x['rating']})" for x in s["results"]) + ".")
