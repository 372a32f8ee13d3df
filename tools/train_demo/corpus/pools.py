"""Value pools shared by the conversation generators (cities, people, repos, ...)."""

from __future__ import annotations

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
