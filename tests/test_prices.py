"""The shipped price table (kubetrain/cost/prices.json): every catalog type priced in both regions or named as
unpriced with a reason, Capacity Block rates dated from AWS's own page, spot per availability zone."""

from __future__ import annotations

import json
from pathlib import Path

from kubetrain.cost.cost_props import PoolPricing
from kubetrain.cost.price_sources import build_table, render
from kubetrain.cost.prices import PRICES_FILE, PriceTable, node_price, price_table, unpriced_reason
from kubetrain.model.instances import BUILTIN_CATALOG

ROOT = Path(__file__).resolve().parents[1]
REGIONS = ("us-east-1", "us-west-2")
# What AWS sells as Capacity Blocks (EC2 user guide, "Capacity Blocks for ML": supported instance types).
CAPACITY_BLOCK_TYPES = ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
                        "p6-b200.48xlarge", "trn1.32xlarge", "trn2.48xlarge")


def test_the_table_is_what_the_generator_writes_from_the_sources() -> None:
    families = {name.split(".")[0] for name in BUILTIN_CATALOG.names()}
    assert render(build_table(ROOT / "scripts" / "price_sources", families)) == PRICES_FILE.read_text()


def test_every_catalog_type_has_an_on_demand_price_or_a_reason_in_both_regions() -> None:
    table = price_table()
    missing = [(name, region) for name in BUILTIN_CATALOG.names() for region in REGIONS
               if table.get(name, region, "on-demand") is None and not table.unpriced(name, region, "on-demand")]
    assert not missing
    # A price and a reason never both.
    assert not [(name, region) for name in BUILTIN_CATALOG.names() for region in REGIONS
                if table.get(name, region, "on-demand") and table.unpriced(name, region, "on-demand")]


def test_every_capacity_block_type_has_a_current_first_party_rate_or_a_reason() -> None:
    table = price_table()
    for name in CAPACITY_BLOCK_TYPES:
        for region in REGIONS:
            price = table.get(name, region, "capacity-block")
            assert price is not None or table.unpriced(name, region, "capacity-block"), (name, region)
            if price is not None:
                source = table.sources[price.source]
                assert source["url"].startswith("https://aws.amazon.com/ec2/capacityblocks/pricing")
                assert source["as_of"] >= "2026-07", source["as_of"]
    assert table.get("p5.48xlarge", "us-east-1", "capacity-block").usd == 41.528
    assert table.get("p4d.24xlarge", "us-west-2", "capacity-block").usd == 11.80
    # Sold, but not in a region the table prices: named with the reason, never invented.
    assert "not transcribed" in unpriced_reason(["p5.48xlarge"], "us-west-2", "reserved",
                                                PoolPricing(rate="capacity-block"))


def test_spot_is_the_cheapest_zone_the_pool_may_use_with_the_range() -> None:
    data = {"sources": {"s": {"as_of": "2026-07-20"}}, "prices": {"us-east-1": {"p5.48xlarge": {
        "on-demand": {"usd": 55.04, "source": "s"},
        # one zone's spot price sits at the on-demand cap: a mean would count it, the cheapest zone does not
        "spot": {"usd": 20.0, "source": "s", "zones": {"use1-az1": 20.0, "use1-az2": 30.0, "use1-az4": 55.04}}}}}}
    table = PriceTable(data)
    anywhere = table.get("p5.48xlarge", "us-east-1", "spot")
    assert (anywhere.usd, anywhere.cheapest_zone, anywhere.zone_range) == (20.0, "use1-az1", (20.0, 55.04))
    pinned = table.get("p5.48xlarge", "us-east-1", "spot", ["use1-az2", "use1-az4"])
    assert (pinned.usd, pinned.cheapest_zone, pinned.zone_range) == (30.0, "use1-az2", (30.0, 55.04))
    assert table.get("p5.48xlarge", "us-east-1", "spot", ["use1-az6"]) is None  # no figure for that zone
    assert table.region_of_zone_id("use1-az4") == "us-east-1"


def test_the_shipped_spot_prices_are_per_zone_and_the_node_price_says_which() -> None:
    raw = json.loads(PRICES_FILE.read_text())
    spot = raw["prices"]["us-east-1"]["p5.48xlarge"]["spot"]
    assert spot["usd"] == min(spot["zones"].values()) and len(spot["zones"]) > 1
    price = node_price(["p5.48xlarge"], "us-east-1", "spot", None)
    assert price is not None and price.usd == spot["usd"]
    cheapest = min(spot["zones"], key=spot["zones"].get)
    assert f"cheapest of {len(spot['zones'])} zones ({cheapest}; " in price.basis
