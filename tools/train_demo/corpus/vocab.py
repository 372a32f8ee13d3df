"""Word lists for procedural tool names and parameter names, split into training and
held-out vocabularies by one fixed rule (`is_heldout`).

A tool name is a verb and an entity (``create_invoice``, ``createInvoice``,
``billing.invoices.create``); a parameter name is an attribute word, optionally with an
entity prefix or one of the shared AFFIXES (``invoice_id``, ``max_results``,
``from_currency``). Every name carries at least one content word, and content words are
split by the rule below, so a held-out tool or parameter name never occurs in training.

Split rule, per word: held out iff the word is in FORCED_HELDOUT (the words of the issue's
probe tool ``convert_currency(amount, from_currency, to_currency)``) or ``crc32(word) % 4
== 0`` (a plural entity follows its singular); except that the identifier words of the hand-written training tools
(typed_catalog_*) and the AFFIXES always stay on the training side.
"""

from __future__ import annotations

import re
import zlib

FORCED_HELDOUT = frozenset({"convert", "currency", "amount"})

# Shared structural words: never a name's only content word, never split.
AFFIXES = frozenset({"id", "ids", "max", "min", "is", "include", "from", "to", "new", "by", "per", "num"})

# (verb, past tense)
VERBS = [
    ("create", "created"), ("get", "fetched"), ("list", "listed"), ("update", "updated"), ("delete", "deleted"),
    ("archive", "archived"), ("restore", "restored"), ("approve", "approved"), ("reject", "rejected"),
    ("assign", "assigned"), ("cancel", "cancelled"), ("schedule", "scheduled"), ("publish", "published"),
    ("export", "exported"), ("import", "imported"), ("validate", "validated"), ("calculate", "calculated"),
    ("convert", "converted"), ("sync", "synced"), ("refresh", "refreshed"), ("merge", "merged"),
    ("split", "split"), ("rename", "renamed"), ("tag", "tagged"), ("lock", "locked"), ("unlock", "unlocked"),
    ("share", "shared"), ("duplicate", "duplicated"), ("estimate", "estimated"), ("submit", "submitted"),
    ("register", "registered"), ("verify", "verified"), ("reset", "reset"), ("pause", "paused"),
    ("resume", "resumed"), ("start", "started"), ("stop", "stopped"), ("notify", "notified"),
    ("search", "searched"), ("lookup", "looked up"), ("preview", "previewed"), ("render", "rendered"),
    ("upload", "uploaded"), ("download", "downloaded"), ("attach", "attached"), ("detach", "detached"),
    ("enable", "enabled"), ("disable", "disabled"), ("rotate", "rotated"), ("resize", "resized"),
    ("translate", "translated"), ("summarize", "summarized"), ("classify", "classified"), ("rank", "ranked"),
    ("reserve", "reserved"), ("release", "released"), ("transfer", "transferred"), ("refund", "refunded"),
    ("charge", "charged"), ("invite", "invited"), ("remove", "removed"), ("add", "added"), ("count", "counted"),
    ("compare", "compared"), ("forecast", "forecast"), ("measure", "measured"), ("ping", "pinged"),
    ("deploy", "deployed"), ("rollback", "rolled back"), ("backup", "backed up"), ("scan", "scanned"),
    ("print", "printed"), ("track", "tracked"), ("rate", "rated"), ("book", "booked"), ("order", "ordered"),
]

# (entity, plural)
ENTITIES = [
    ("invoice", "invoices"), ("customer", "customers"), ("order", "orders"), ("ticket", "tickets"),
    ("shipment", "shipments"), ("booking", "bookings"), ("playlist", "playlists"), ("project", "projects"),
    ("task", "tasks"), ("document", "documents"), ("report", "reports"), ("user", "users"), ("team", "teams"),
    ("account", "accounts"), ("payment", "payments"), ("subscription", "subscriptions"), ("coupon", "coupons"),
    ("product", "products"), ("warehouse", "warehouses"), ("vehicle", "vehicles"), ("driver", "drivers"),
    ("route", "routes"), ("parcel", "parcels"), ("recipe", "recipes"), ("ingredient", "ingredients"),
    ("patient", "patients"), ("appointment", "appointments"), ("prescription", "prescriptions"),
    ("course", "courses"), ("student", "students"), ("grade", "grades"), ("lesson", "lessons"),
    ("album", "albums"), ("photo", "photos"), ("video", "videos"), ("podcast", "podcasts"), ("episode", "episodes"),
    ("article", "articles"), ("comment", "comments"), ("post", "posts"), ("channel", "channels"),
    ("server", "servers"), ("cluster", "clusters"), ("container", "containers"), ("volume", "volumes"),
    ("secret", "secrets"), ("certificate", "certificates"), ("domain", "domains"), ("firewall", "firewalls"),
    ("alert", "alerts"), ("incident", "incidents"), ("metric", "metrics"), ("dashboard", "dashboards"),
    ("pipeline", "pipelines"), ("build", "builds"), ("release", "releases"), ("branch", "branches"),
    ("sensor", "sensors"), ("device", "devices"), ("light", "lights"), ("thermostat", "thermostats"),
    ("garden", "gardens"), ("plant", "plants"), ("pet", "pets"), ("vaccine", "vaccines"), ("flight", "flights"),
    ("hotel", "hotels"), ("room", "rooms"), ("trip", "trips"), ("itinerary", "itineraries"),
    ("contract", "contracts"), ("lead", "leads"), ("deal", "deals"), ("campaign", "campaigns"),
    ("survey", "surveys"), ("question", "questions"), ("poll", "polls"), ("event", "events"),
    ("venue", "venues"), ("seat", "seats"), ("currency", "currencies"), ("budget", "budgets"),
    ("expense", "expenses"), ("receipt", "receipts"), ("loan", "loans"), ("portfolio", "portfolios"),
    ("stock", "stocks"), ("wallet", "wallets"), ("transaction", "transactions"), ("recording", "recordings"),
    ("meeting", "meetings"), ("note", "notes"), ("reminder", "reminders"), ("calendar", "calendars"),
    ("contact", "contacts"), ("message", "messages"), ("image", "images"), ("font", "fonts"), ("page", "pages"),
    ("form", "forms"), ("field", "fields"), ("backup", "backups"), ("snapshot", "snapshots"),
    ("repository", "repositories"), ("package", "packages"), ("license", "licenses"), ("quota", "quotas"),
    ("shift", "shifts"), ("employee", "employees"), ("vacation", "vacations"), ("payroll", "payrolls"),
    ("asset", "assets"), ("printer", "printers"), ("job", "jobs"), ("queue", "queues"), ("webhook", "webhooks"),
    ("map", "maps"), ("region", "regions"), ("zone", "zones"), ("bike", "bikes"), ("locker", "lockers"),
]

# Service namespaces for dotted names (billing.invoices.create).
NAMESPACES = ["billing", "crm", "inventory", "logistics", "kitchen", "clinic", "school", "media", "social",
              "infra", "security", "monitoring", "devops", "home", "garden", "vet", "travel", "sales", "marketing",
              "forms", "finance", "trading", "office", "hr", "facilities", "fleet", "storage", "analytics",
              "support", "catalog", "payments", "events", "learning", "maps", "library", "studio", "shop"]

# Parameter attribute words by kind. Strings: value pool name in procedural_values.
STR_ATTRS = [("name", "name"), ("title", "title"), ("label", "word"), ("note", "sentence"), ("summary", "sentence"),
             ("reason", "sentence"), ("description", "sentence"), ("nickname", "name"), ("headline", "title"),
             ("caption", "sentence"), ("slug", "slug"), ("keyword", "word"), ("email", "email"), ("url", "url"),
             ("path", "path"), ("date", "date"), ("deadline", "date"), ("time", "clock"), ("city", "city"),
             ("country", "country"), ("language", "language"), ("phone", "phone"), ("color", "color"),
             ("timezone", "timezone"), ("owner", "person"), ("author", "person"), ("reviewer", "person"),
             ("sku", "code"), ("reference", "code"), ("zip", "zip"), ("street", "street"), ("comment", "sentence")]
INT_ATTRS = ["count", "limit", "quantity", "page", "width", "height", "age", "year", "port", "retries", "timeout",
             "duration", "seats", "floor", "priority", "capacity", "days", "hours", "minutes", "offset", "size",
             "level", "rank", "copies", "guests", "nights", "replicas", "version", "step", "interval"]
NUM_ATTRS = ["price", "amount", "ratio", "weight", "score", "threshold", "latitude", "longitude", "rate",
             "discount", "temperature", "distance", "balance", "tax", "tip", "speed", "percentage", "budget",
             "height", "depth", "humidity", "brightness", "factor", "margin"]
BOOL_ATTRS = ["archived", "urgent", "public", "recursive", "verbose", "overwrite", "notify", "enabled", "confirmed",
              "visible", "pinned", "draft", "paid", "active", "async", "force", "silent", "shared", "compressed",
              "encrypted", "refundable", "featured", "muted", "anonymous"]
# (attribute, allowed values)
ENUM_ATTRS = [("status", ["open", "pending", "closed"]), ("format", ["json", "csv", "xml", "pdf"]),
              ("order", ["asc", "desc"]), ("visibility", ["public", "private", "internal"]),
              ("severity", ["low", "medium", "high", "critical"]), ("unit", ["metric", "imperial"]),
              ("size", ["small", "medium", "large"]), ("mode", ["fast", "balanced", "thorough"]),
              ("region", ["us-east", "eu-west", "ap-south"]), ("method", ["card", "cash", "transfer"]),
              ("tier", ["free", "pro", "enterprise"]), ("frequency", ["daily", "weekly", "monthly"]),
              ("theme", ["light", "dark", "system"]), ("gender", ["female", "male", "other"]),
              ("category", ["food", "travel", "office", "other"]), ("channel", ["email", "sms", "push"]),
              ("level", ["debug", "info", "warning", "error"]), ("role", ["viewer", "editor", "admin"]),
              ("kind", ["bug", "feature", "chore"]), ("cabin", ["economy", "business", "first"]),
              ("quality", ["low", "standard", "high"]), ("scope", ["user", "team", "global"])]
# Code-valued strings for from_X / to_X pairs: (attribute, value pool name).
PAIR_ATTRS = [("currency", "currency_code"), ("language", "language_code"), ("unit", "length_unit"),
              ("timezone", "timezone"), ("format", "file_format"), ("city", "city"), ("account", "code"),
              ("date", "date"), ("branch", "git_branch"), ("warehouse", "code")]
# Array-of-string attributes (plural word, item value pool).
LIST_ATTRS = [("tags", "word"), ("labels", "word"), ("keywords", "word"), ("recipients", "email"),
              ("cities", "city"), ("languages", "language"), ("colors", "color"), ("members", "person"),
              ("watchers", "person"), ("topics", "word"), ("skus", "code"), ("paths", "path"), ("urls", "url"),
              ("aliases", "word"), ("categories", "word"), ("attendees", "email"), ("hosts", "word"),
              ("owners", "person"), ("emails", "email"), ("phones", "phone"), ("hashtags", "word"), ("genres", "word"),
              ("skills", "word"), ("interests", "word"), ("allergies", "word"), ("dependencies", "word"),
              ("scopes", "word"), ("features", "word"), ("sources", "url"), ("symptoms", "word"), ("flavors", "word"),
              ("countries", "country"), ("dates", "date"), ("timezones", "timezone"), ("authors", "person")]
# Container words for nested-object parameters (singular) and arrays of objects (plural);
# their properties are scalar attributes drawn from the lists above.
OBJECT_ATTRS = ["address", "dimensions", "location", "window", "details", "budget", "schedule", "limits", "filter",
                "options", "range", "style", "metadata", "settings", "preferences", "criteria", "payload", "profile",
                "spec", "target", "origin", "destination", "billing", "shipping", "config", "layout", "policy", "coordinates",
                "credentials", "thresholds", "envelope", "packaging", "pricing", "rating", "recurrence", "retention",
                "notification", "appearance", "constraints", "requirements"]
OBJECT_LIST_ATTRS = ["items", "lines", "stops", "rules", "entries", "participants", "rows", "records", "slots",
                     "steps", "attachments", "segments", "waypoints", "tiers", "mappings", "bundles"]

def words_of(identifier: str) -> list[str]:
    """Lower-case words of a snake_case, camelCase or dotted identifier."""
    out = []
    for part in re.split(r"[._\-]", identifier):
        out += [w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", part)]
    return out


def _handwritten_words() -> frozenset:
    from .bash_agent import BASH_TOOL
    from .typed_convs import TOOLS

    ids = {BASH_TOOL["function"]["name"], "command"}
    for t in TOOLS:
        ids.update(t.names)
        for p in t.params:
            ids.update(p.aliases)
            for sub in (p.items or {}).get("properties", {}):
                ids.add(sub)
    return frozenset(w for i in ids for w in words_of(i))


HANDWRITTEN_WORDS = _handwritten_words()


LEMMA = {plural: singular for singular, plural in ENTITIES}  # a plural follows its singular


def is_heldout(word: str) -> bool:
    """The split rule (module docstring)."""
    lemma = LEMMA.get(word, word)
    if {word, lemma} & (AFFIXES | HANDWRITTEN_WORDS):
        return False
    return lemma in FORCED_HELDOUT or zlib.crc32(lemma.encode()) % 4 == 0


def split_words(split: str, entries, key=lambda e: e):
    """The entries whose word (and every word of a compound entry) is on `split`'s side."""
    want = split == "heldout"
    return [e for e in entries if all(is_heldout(w) == want for w in words_of(key(e)))]
