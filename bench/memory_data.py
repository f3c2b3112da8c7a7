#!/usr/bin/env python3
"""Synthetic memories for the memory benchmarks: N distinct, plausible facts about a user's
world, deterministic (the same N gives the same lines), as JSON lines that
`ringfence memory import` reads (kind, content, memoryType, category, tags).

    python3 bench/memory_data.py 100000 > bench/.corpus/memories-100k.jsonl

Each line combines a person, an activity, an object, a place and a time from word lists
(360,000 combinations); an index is
mapped through a fixed permutation of the combination space, so neighbouring lines differ in
every part.
"""
import json
import sys

PEOPLE = [
    "User", "User's sister Maya", "User's brother Theo", "User's colleague Priya", "User's neighbour Karl",
    "User's cousin Ines", "User's manager Dana", "User's friend Omar", "User's partner Sam", "User's mother",
    "User's father", "User's aunt Rosa", "User's uncle Felix", "User's daughter Lila", "User's son Jonas",
    "User's mentor Grace", "User's landlord Mr. Patel", "User's dentist Dr. Osei", "User's roommate Kenji",
    "User's coach Bea", "User's grandmother Elsa", "User's old classmate Ravi", "User's teammate Luca",
    "User's client Harper", "User's therapist Dr. Lind", "User's niece Zoe", "User's nephew Milo",
    "User's godfather Arturo", "User's piano teacher Mrs. Kim", "User's accountant Devon",
    "User's book club friend Alma", "User's climbing partner Rio", "User's former boss Helen",
    "User's childhood friend Tariq", "User's yoga instructor Nia", "User's barber Sal",
    "User's vet Dr. Moreau", "User's tenant Greta", "User's business partner Idris", "User's pen pal Yuki",
]
ACTIVITIES = [
    ("recommended", "the novel", "preference", "hobbies"),
    ("borrowed", "the camping stove", "event", "personal"),
    ("is learning to cook", "a Sichuan dish", "skill", "hobbies"),
    ("gave the user", "a hand-knitted scarf", "event", "relationships"),
    ("is allergic to", "penicillin", "fact", "health"),
    ("wants to visit", "the fjords of Norway", "goal", "goals"),
    ("always orders", "an oat flat white", "preference", "preferences"),
    ("repaired", "the kitchen faucet", "event", "personal"),
    ("is training for", "a half marathon", "goal", "health"),
    ("collects", "vintage fountain pens", "habit", "hobbies"),
    ("dislikes", "loud open-plan offices", "preference", "professional"),
    ("moved into", "a flat near the river", "event", "personal"),
    ("presented", "the quarterly budget review", "event", "professional"),
    ("practises", "the violin", "habit", "hobbies"),
    ("is saving for", "an electric bike", "goal", "goals"),
    ("celebrated", "a tenth wedding anniversary", "event", "relationships"),
    ("keeps a diary about", "bird sightings", "habit", "hobbies"),
    ("was diagnosed with", "mild asthma", "fact", "health"),
    ("volunteers at", "the animal shelter", "habit", "personal"),
    ("switched jobs to", "a logistics startup", "event", "professional"),
    ("teaches the user", "chess openings", "skill", "relationships"),
    ("is afraid of", "deep water", "fact", "personal"),
    ("grows", "chili peppers on the balcony", "habit", "hobbies"),
    ("lent the user", "a stack of jazz records", "event", "relationships"),
    ("prefers", "trains over flying", "preference", "preferences"),
    ("finished", "a pottery course", "skill", "hobbies"),
    ("plans to learn", "Portuguese", "goal", "goals"),
    ("bought", "a secondhand sailboat", "event", "hobbies"),
    ("avoids", "caffeine after lunch", "habit", "health"),
    ("runs", "a small bakery", "fact", "professional"),
]
TIMES = [
    "last spring", "in January", "every Sunday", "since 2019", "two weeks ago", "this autumn",
    "on weekends", "before the holidays", "in the summer of 2023", "after the move",
    "most mornings", "at the last family dinner", "during the conference", "three years ago",
    "in March 2024", "on Thursday evenings", "after graduating", "during the lockdown",
    "in late November", "every other month", "on the trip to Lisbon", "since childhood",
    "at the office party", "this year", "in 2021", "on rainy days", "last winter",
    "before the wedding", "in the new apartment", "when traveling",
]
PLACES = [
    "in Berlin", "at the lake cabin", "near the old harbour", "in the garden", "at the community centre",
    "in Montreal", "at the downtown office", "by the coast", "in the mountains", "at home",
]
TAGS = ["family", "work", "food", "travel", "health", "money", "home", "music", "sport", "friends"]


def memory(i: int) -> dict:
    space = len(PEOPLE) * len(ACTIVITIES) * len(TIMES) * len(PLACES)
    # A fixed odd multiplier is a permutation of 0..space when coprime with it.
    mult = 7919
    assert space % 7919 != 0
    j = (i * mult + 12345) % space
    p, rest = j % len(PEOPLE), j // len(PEOPLE)
    a, rest = rest % len(ACTIVITIES), rest // len(ACTIVITIES)
    t, w = rest % len(TIMES), rest // len(TIMES)
    verb, obj, mtype, cat = ACTIVITIES[a]
    content = f"{PEOPLE[p]} {verb} {obj} {PLACES[w]} {TIMES[t]}."
    if i >= space:
        content = content[:-1] + f" (note {i // space})."
    return {
        "kind": "memory",
        "content": content,
        "memoryType": mtype,
        "category": cat,
        "tags": [TAGS[(p + a) % len(TAGS)]],
        "source": "bench",
    }


def main() -> None:
    n = int(sys.argv[1])
    out = sys.stdout
    for i in range(n):
        out.write(json.dumps(memory(i)) + "\n")


if __name__ == "__main__":
    main()
