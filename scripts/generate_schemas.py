"""Regenerate the shipped custom-resource schemas from upstream CRD files.

    python scripts/generate_schemas.py [CRD_FOLDER]   (default: ../shared/crds)

The CRD files are the operators' own, at the versions their kinds name (kubetrain.kinds: `Kind.crd`; download
them from each project's release); the output is constructs/kubetrain/output/schemas/.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kubetrain.output.schemas import crd_sources, generate

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    crds = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "crds"
    if not crds.is_dir():
        sys.exit(f"error: {crds} is not a folder of CRD files; pass the folder holding them")
    missing = [source.file for source in crd_sources() if not (crds / source.file).is_file()]
    if missing:
        sys.exit(f"error: {crds} lacks {', '.join(missing)}")
    written = generate(crds, ROOT / "constructs" / "kubetrain" / "output" / "schemas")
    print(f"wrote {len(written)} files into constructs/kubetrain/output/schemas/")
