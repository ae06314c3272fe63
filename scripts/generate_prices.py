"""Regenerate the shipped EC2 price table, constructs/kubetrain/cost/prices.json.

    python scripts/generate_prices.py [OFFER_FILE ...]

Without arguments it runs offline from the transcribed public figures in scripts/price_sources/ (each
file's source and date in its SOURCES.json). Each OFFER_FILE is an AWS Price List bulk offer file for
AmazonEC2 (JSON; https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current/<region>/index.json):
its on-demand prices replace the transcribed ones for the catalog's instance-type families.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kubetrain.cost.price_sources import build_table, render
from kubetrain.cost.prices import PRICES_FILE
from kubetrain.model.instances import BUILTIN_CATALOG

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    offers = [Path(arg) for arg in sys.argv[1:]]
    missing = [str(path) for path in offers if not path.is_file()]
    if missing:
        sys.exit(f"error: no offer file {', '.join(missing)}")
    families = {name.split(".")[0] for name in BUILTIN_CATALOG.names()}
    table = build_table(ROOT / "scripts" / "price_sources", families, offers)
    PRICES_FILE.write_text(render(table))
    count = sum(len(types) for types in table["prices"].values())
    print(f"wrote {count} instance types in {len(table['prices'])} regions into {PRICES_FILE.relative_to(ROOT)}")
