"""Regenerate the shipped custom-resource schemas from upstream CRD files.

    python scripts/generate_schemas.py [CRD_FOLDER ...]   (default: ../shared/crds)

The CRD files are the operators' own, at the versions their kinds name (kubetrain.kinds: `Kind.crd`; download
them from each project's release); the folders are searched in order, and a kind whose CRD none of them holds
keeps the schema already shipped. The output is constructs/kubetrain/validation/schemas/.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kubetrain.validation.schemas import crd_sources, generate

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    folders = [Path(arg) for arg in sys.argv[1:]] or [ROOT.parent / "shared" / "crds"]
    for folder in folders:
        if not folder.is_dir():
            sys.exit(f"error: {folder} is not a folder of CRD files; pass the folders holding them")
    missing = [source.file for source in crd_sources() if not any((f / source.file).is_file() for f in folders)]
    if missing:
        print(f"kept the shipped schemas of {', '.join(missing)} (in none of the folders given)")
    try:
        written = generate(folders, ROOT / "constructs" / "kubetrain" / "output" / "schemas")
    except FileNotFoundError as error:
        sys.exit(f"error: {error}")
    print(f"wrote {len(written)} files into constructs/kubetrain/validation/schemas/")
