"""Build the shipped price table (prices.json) from public sources: `scripts/generate_prices.py`.

Inputs, in scripts/price_sources/ (provenance of each file in its SOURCES.json):
  - `*on-demand*.csv`: instance_type,usd_per_hour of one region (transcribed from a generated table);
  - `skypilot-aws-vms.csv`: SkyPilot's AWS catalog rows (Price = on-demand, SpotPrice per availability
    zone ID): on-demand where no better source has it, and the spot snapshot, kept per zone (a pool pays the
    cheapest zone it may use, not a mean that counts zones whose spot price sits at the on-demand cap);
  - `capacity-blocks.csv`: instance_type,region,usd_per_hour of EC2 Capacity Blocks;
  - `unpriced.csv`: instance_type,region,rate,reason: what the catalog has no price for, and why (AWS publishes
    none, or it is not transcribed), so a missing price is a stated fact and never a silent gap.
And, when given, AWS Price List bulk offer files for AmazonEC2 (JSON, e.g.
https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current/us-west-2/index.json): their
on-demand prices replace the transcribed ones, dated by the file's publicationDate.

The format of an offer file (AWS Billing user guide, "Reading the service price list file for an AWS
service"): `products` maps a SKU to its `attributes` (instanceType, regionCode, operatingSystem, tenancy,
preInstalledSw, capacitystatus, ...); `terms.OnDemand` maps the SKU to offer terms whose
`priceDimensions` carry `pricePerUnit.USD` per hour. Like Karpenter's pricing provider
(karpenter-provider-aws, pkg/providers/pricing/pricing.go), only Linux, shared tenancy, no pre-installed
software and capacitystatus Used count.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

RATES = ("on-demand", "spot", "capacity-block")
_OFFER_FILTER = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def offer_prices(offer: dict[str, Any], families: set[str]) -> dict[tuple[str, str], float]:
    """(region, instance type) -> on-demand USD/hour of the `families`' instance types, from an AmazonEC2 offer
    file's products and terms."""
    wanted: dict[str, tuple[str, str]] = {}
    for sku, product in (offer.get("products") or {}).items():
        attributes = product.get("attributes") or {}
        if str(attributes.get("instanceType")).split(".")[0] in families and all(
                attributes.get(key) == value for key, value in _OFFER_FILTER.items()):
            wanted[sku] = (attributes.get("regionCode", ""), attributes["instanceType"])
    prices: dict[tuple[str, str], float] = {}
    for sku, terms in ((offer.get("terms") or {}).get("OnDemand") or {}).items():
        if sku not in wanted:
            continue
        for term in terms.values():
            for dimension in (term.get("priceDimensions") or {}).values():
                usd = float((dimension.get("pricePerUnit") or {}).get("USD", "0"))
                if usd > 0 and dimension.get("unit", "Hrs") == "Hrs":
                    prices[wanted[sku]] = usd
    return prices


def build_table(sources: Path, families: Iterable[str], offers: Iterable[Path] = ()) -> dict[str, Any]:
    """The price table of the instance types of `families` (p5, g6e, ...): {"about", "sources", "prices":
    {region: {instance type: {rate: {usd, source}}}}}. A fleet's own InstanceType of such a family (p5.4xlarge)
    is priced too."""
    wanted = set(families)
    provenance: dict[str, Any] = json.loads((sources / "SOURCES.json").read_text())
    prices: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}

    def put(region: str, instance: str, rate: str, usd: float, source: str, **extra: Any) -> None:
        if instance.split(".")[0] in wanted:
            prices.setdefault(region, {}).setdefault(instance, {})[rate] = {"usd": round(usd, 6), "source": source,
                                                                             **extra}

    # Least authoritative first: later sources replace earlier figures.
    spot: dict[tuple[str, str], dict[str, float]] = {}
    for row in _rows(sources / "skypilot-aws-vms.csv"):
        key = (row["Region"], row["InstanceType"])
        if row["Price"]:
            put(*key, "on-demand", float(row["Price"]), "skypilot-aws-vms.csv")
        if row["SpotPrice"]:
            spot.setdefault(key, {})[row["AvailabilityZone"]] = float(row["SpotPrice"])
    for (region, instance), zones in spot.items():
        put(region, instance, "spot", min(zones.values()), "skypilot-aws-vms.csv", zones=dict(sorted(zones.items())))
    for path in sorted(sources.glob("*on-demand*.csv")):
        for region in provenance[path.name]["regions"]:
            for row in _rows(path):
                put(region, row["instance_type"], "on-demand", float(row["usd_per_hour"]), path.name)
    for row in _rows(sources / "capacity-blocks.csv"):
        put(row["region"], row["instance_type"], "capacity-block", float(row["usd_per_hour"]), "capacity-blocks.csv")
    for path in offers:
        offer = json.loads(path.read_text())
        source = f"aws-price-list:{path.name}"
        provenance[source] = {"rate": "on-demand", "title": f"AWS Price List bulk offer file {offer.get('offerCode')}"
                              f" version {offer.get('version')}", "url": "https://pricing.us-east-1.amazonaws.com"
                              "/offers/v1.0/aws/AmazonEC2/current/<region>/index.json",
                              "as_of": str(offer.get("publicationDate", ""))[:10]}
        for (region, instance), usd in offer_prices(offer, wanted).items():
            put(region, instance, "on-demand", usd, source)
    unpriced: dict[str, dict[str, dict[str, str]]] = {}
    for row in _rows(sources / "unpriced.csv"):
        region, instance, rate = row["region"], row["instance_type"], row["rate"]
        if instance.split(".")[0] in wanted and rate not in prices.get(region, {}).get(instance, {}):
            unpriced.setdefault(region, {}).setdefault(instance, {})[rate] = row["reason"]
    used = {figure["source"] for types in prices.values() for rates in types.values() for figure in rates.values()}
    return {
        "about": "EC2 prices in USD per instance-hour (Linux, shared tenancy), by region, instance type and rate: "
                 "on-demand; spot, a dated snapshot per availability zone ID (usd: the cheapest zone; spot "
                 "prices move hourly); capacity-block, the published Capacity Blocks for ML rate. `unpriced` names "
                 "what has no price and why. Generated by scripts/generate_prices.py from scripts/price_sources/; "
                 "do not edit by hand.",
        "sources": {name: provenance[name] for name in sorted(used)},
        "prices": {region: {instance: dict(sorted(rates.items(), key=lambda r: RATES.index(r[0])))
                            for instance, rates in sorted(types.items())} for region, types in sorted(prices.items())},
        "unpriced": {region: {instance: dict(sorted(rates.items())) for instance, rates in sorted(types.items())}
                     for region, types in sorted(unpriced.items())},
    }


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=False) + "\n"
