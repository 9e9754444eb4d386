#!/usr/bin/env python3
"""Usage: check_citation.py CITATION.cff PROJECT_VERSION CONTRACT_VERSION

CITATION.cff parses as YAML (python3-yaml), has the keys CFF 1.2.0 requires,
names the version CMake builds and the contract version of docs/spec.md."""
import datetime
import sys

try:
    import yaml
except ImportError:
    sys.exit("python3-yaml is missing (ci/deps installs it)")

path, version, contract = sys.argv[1:4]
with open(path, encoding="utf-8") as f:
    cff = yaml.safe_load(f)

errors = []
for key in ("cff-version", "message", "title", "authors", "version"):
    if not cff.get(key):
        errors.append(f"missing or empty key: {key}")
if str(cff.get("cff-version")) != "1.2.0":
    errors.append(f"cff-version is {cff.get('cff-version')!r}, expected 1.2.0")
if str(cff.get("version")) != version:
    errors.append(f"version is {cff.get('version')!r}, CMakeLists.txt says {version}")
authors = cff.get("authors") or []
if not isinstance(authors, list) or not all(isinstance(a, dict) and (a.get("name") or a.get("family-names")) for a in authors):
    errors.append("authors must be a list of persons (family-names) or entities (name)")
released = cff.get("date-released")
if released is not None and not isinstance(released, datetime.date):
    errors.append(f"date-released is {released!r}, not a YYYY-MM-DD date")
if f"contract version {contract}" not in " ".join(str(cff.get("abstract", "")).split()):
    errors.append(f"abstract does not name 'contract version {contract}' (docs/spec.md)")

if errors:
    print("\n".join(f"{path}: {e}" for e in errors))
    sys.exit(1)
print(f"{path}: cff-version {cff['cff-version']}, version {cff['version']}, "
      f"released {released}, {len(authors)} author(s), contract {contract}")
