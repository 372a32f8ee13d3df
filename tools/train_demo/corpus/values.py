"""Argument values for procedural tools: one generator per value pool, all seeded by the
caller's `random.Random`. Values are what users mention and calls copy; they are not
names, so both splits share them."""

from __future__ import annotations

from .pools import CITIES, CURRENCIES, LANGS, PEOPLE, TOPICS

SURNAMES = ["Chen", "Garcia", "Okafor", "Novak", "Silva", "Tanaka", "Muller", "Kowalski", "Haddad", "Larsen",
            "Rossi", "Nguyen", "Kim", "Patel", "Dubois", "Ivanova", "Costa", "Jensen"]
WORDS = ["alpha", "beta", "urgent", "backend", "mobile", "summer", "green", "north", "vip", "legacy", "beta-test",
         "q3", "holiday", "retail", "wholesale", "internal", "demo", "pilot", "archive", "review", "spring", "gold",
         "silver", "blue", "fragile", "express", "weekend", "vegan", "outdoor", "kids"]
TITLES = ["Quarterly review", "Team offsite", "Spring sale", "Server migration", "Welcome pack", "Budget plan",
          "Launch checklist", "Safety training", "Board meeting", "Product demo", "Bug bash", "Year in review",
          "Kitchen remodel", "Road trip", "Onboarding guide", "Weekly digest"]
SENTENCES = ["Customer asked for a callback", "Needs a second review", "Delivered to the wrong address",
             "Duplicate of an older request", "Approved by finance", "Waiting for the supplier",
             "Moved to next week", "Requested by the team lead", "Fixes the login issue", "Only for internal use",
             "Check the numbers again", "Ready for the launch"]
COLORS = ["red", "green", "blue", "orange", "purple", "black", "white", "teal", "#ff8800", "#336699"]
TIMEZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "America/Denver"]
COUNTRY_CODES = ["US", "GB", "DE", "FR", "JP", "IN", "BR", "CA", "ES", "IT", "KR", "MX"]
LANGUAGE_CODES = ["en", "fr", "de", "es", "it", "ja", "pt", "nl", "ko", "sv"]
LENGTH_UNITS = ["mm", "cm", "m", "km", "in", "ft", "mi"]
FILE_FORMATS = ["json", "csv", "xml", "yaml", "pdf", "png", "txt"]
GIT_BRANCHES = ["main", "dev", "release-2.1", "hotfix", "feature-search", "staging"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
STREETS = ["Main Street 12", "Oak Avenue 7", "Harbor Road 221", "Elm Street 5", "Station Square 3", "Hill Lane 48"]


def _code(r):
    return f"{r.choice('ABCDEFGHKMNPRSTX')}{r.choice('ABCDEFGHKMNPRSTX')}-{r.randint(100, 9999)}"


GEN = {
    "name": lambda r: f"{r.choice(PEOPLE).capitalize()} {r.choice(SURNAMES)}",
    "person": lambda r: r.choice(PEOPLE),
    "title": lambda r: r.choice(TITLES),
    "word": lambda r: r.choice(WORDS),
    "sentence": lambda r: r.choice(SENTENCES),
    "slug": lambda r: f"{r.choice(WORDS)}-{r.choice(WORDS)}-{r.randint(1, 99)}",
    "email": lambda r: f"{r.choice(PEOPLE)}@{r.choice(['example.com', 'acme.io', 'shop.net', 'mail.org'])}",
    "url": lambda r: f"https://{r.choice(['example.com', 'acme.io', 'docs.shop.net'])}/{r.choice(WORDS)}/{r.randint(1, 999)}",
    "path": lambda r: f"/{r.choice(['data', 'srv', 'home/user', 'tmp', 'var/www'])}/{r.choice(WORDS)}.{r.choice(FILE_FORMATS)}",
    "date": lambda r: f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
    "clock": lambda r: f"{r.randint(6, 21):02d}:{r.choice(['00', '15', '30', '45'])}",
    "city": lambda r: r.choice(CITIES),
    "country": lambda r: r.choice(COUNTRY_CODES),
    "language": lambda r: r.choice(LANGS),
    "phone": lambda r: f"+{r.randint(1, 49)} {r.randint(100, 999)} {r.randint(1000, 9999)}",
    "color": lambda r: r.choice(COLORS),
    "timezone": lambda r: r.choice(TIMEZONES),
    "code": _code,
    "zip": lambda r: f"{r.randint(10000, 99999)}",
    "street": lambda r: r.choice(STREETS),
    "currency_code": lambda r: r.choice(CURRENCIES),
    "language_code": lambda r: r.choice(LANGUAGE_CODES),
    "length_unit": lambda r: r.choice(LENGTH_UNITS),
    "file_format": lambda r: r.choice(FILE_FORMATS),
    "git_branch": lambda r: r.choice(GIT_BRANCHES),
    "weekday": lambda r: r.choice(WEEKDAYS),
    "topic": lambda r: r.choice(TOPICS),
}


def integer(r, attr=""):
    """A plausible integer for an attribute."""
    if attr in ("year",):
        return r.randint(1990, 2030)
    if attr in ("port",):
        return r.choice([22, 80, 443, 5432, 8080, 9000])
    if attr in ("width", "height", "size"):
        return r.choice([64, 128, 256, 640, 800, 1024, 1920])
    return r.choice([r.randint(1, 12), r.randint(1, 12), r.randint(10, 500)])


def number(r):
    """A plausible JSON number: integral about a third of the time."""
    return r.choice([r.randint(1, 500), round(r.uniform(0.1, 99), 1), round(r.uniform(1, 2000), 2)])
