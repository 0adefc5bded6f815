"""Vocabulary the generator picks from: small fixed tuples, so a record is a few index lookups.

Changing any tuple changes every seed's data; tests only rely on determinism, not on the words.
A few entries carry non-ASCII letters on purpose, so consumers see real UTF-8.
"""

import unicodedata

ADJECTIVES = (
    "Blue", "Northern", "Silver", "Bright", "Quiet", "Rapid", "Golden", "Green", "Iron", "Clear",
    "Coastal", "Summit", "Urban", "Prime", "Solid", "Wild", "Crimson", "Polar", "Lucky", "Nova",
    "Alpine", "Royal", "Swift", "Grand", "Open", "Little", "Eastern", "Sunny", "Stellar", "Noble",
    "Zürich", "Ørsted",
)  # fmt: skip

NOUNS = (
    "Harbor", "Peak", "River", "Forge", "Field", "Bridge", "Stone", "Orchard", "Lantern", "Anchor",
    "Meadow", "Falcon", "Cedar", "Beacon", "Canyon", "Harvest", "Signal", "Compass", "Willow",
    "Quarry", "Pioneer", "Garden", "Atlas", "Vertex", "Horizon", "Summit", "Ember", "Delta",
    "Crest", "Mosaic", "Café", "Fjörd",
)  # fmt: skip

SUFFIXES = (
    "Ltd", "GmbH", "Inc", "LLC", "Group", "Partners", "Labs", "Logistics", "Systems", "Foods",
    "Studio", "Holdings", "Analytics", "Consulting", "Media", "Energy",
)  # fmt: skip

FIRST_NAMES = (
    "Anna", "Ben", "Chloé", "David", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kara",
    "Liam", "Mei", "Noah", "Olga", "Pedro", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera",
    "Wen", "Xavier", "Yara", "Zoë", "Søren", "Amélie", "Luca", "Maya", "Nils", "Priya",
)  # fmt: skip

LAST_NAMES = (
    "Smith", "Müller", "García", "Kowalski", "Nguyen", "Okafor", "Rossi", "Jensen", "Silva",
    "Tanaka", "Dubois", "Novak", "Haddad", "Ivanova", "Kim", "Larsen", "Moreau", "Patel",
    "Quist", "Romero", "Schmidt", "Torres", "Weber", "Young", "Zhang", "Berg", "Costa", "Eriksen",
    "Fischer", "Horvat", "Andersson", "O'Brien",
)  # fmt: skip

PRODUCTS = (
    "Analytics Suite", "Support Plan", "Data Platform", "Starter Bundle", "Enterprise Licence",
    "Onboarding Package", "Cloud Storage", "Mobile App", "Training Days", "API Access",
    "Security Audit", "Integration Pack", "Premium Seats", "Hardware Refresh", "Consulting Hours",
    "Managed Backup",
)  # fmt: skip

DEAL_KINDS = ("New", "Renewal", "Upsell", "Expansion", "Pilot", "Migration", "Add-on", "Trial")

CURRENCIES = ("USD", "EUR", "GBP", "CHF", "SEK", "JPY", "USD", "EUR")

STAGES = ("lead", "qualified", "proposal", "negotiation", "closed")

SUBJECTS = (
    "Re: pricing", "Follow-up on our call", "Contract draft", "Quick question", "Meeting notes",
    "Next steps", "Invoice", "Proposal v2", "Re: re: timeline", "Introduction", "Demo recording",
    "Security questionnaire", "Renewal terms", "Kick-off agenda", "Fwd: requirements", "Thanks!",
)  # fmt: skip

SENTENCES = (
    "Thanks for taking the time to talk today.",
    "As discussed, I attached the updated figures.",
    "Could you confirm the number of seats you need?",
    "Our legal team will review the contract this week.",
    "Let me know if the proposed timeline works for you.",
    "We can start the onboarding as soon as the order is signed.",
    "The discount is valid until the end of the quarter.",
    "I have looped in my colleague who handles integrations.",
    "Please find the security documentation below.",
    "Happy to set up another call if anything is unclear.",
    "The pilot results look promising on our side.",
    "We would like to extend the trial by two weeks.",
    "Budget approval is expected next month.",
    "Could you send the invoice to our accounts team?",
    "Naïve question: does the API support webhooks?",
    "Looking forward to working together — best regards.",
)


def ascii_slug(word: str) -> str:
    """Lower-case ASCII letters of ``word`` ('Zoë' → 'zoe'), for e-mail addresses and domains."""
    folded = unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode()
    return "".join(ch for ch in folded.lower() if ch.isalnum())


SLUGS: dict[str, str] = {
    word: ascii_slug(word)
    for group in (ADJECTIVES, NOUNS, FIRST_NAMES, LAST_NAMES)
    for word in group
}
"""Precomputed slugs of the words used in addresses (computed once, at import)."""
