from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from daemon.core.toml_locations import Location, locate_keys, nearest_location

DOCUMENT = """\
# a comment with [brackets] and key = value
top = 1
[governor]
state_dir = "/var/lib/x#not-a-comment"   # trailing comment
policy_dirs = [
    "/a",
    "/b",
]
"quoted key" = 2
dotted.inner = 3
notes = \"\"\"
fake = 1
[fake]
\"\"\"
after = 4

[[instances]]
name = "a"
[[instances]]
  name = "b"
[metrics.deep]
port = { value = 1 }
"""


def test_tables_keys_and_arrays_of_tables_are_located() -> None:
    found = locate_keys(DOCUMENT)
    assert found[("top",)] == Location(2, 1)
    assert found[("governor",)] == Location(3, 2)
    assert found[("governor", "state_dir")] == Location(4, 1)
    assert found[("governor", "policy_dirs")] == Location(5, 1)
    assert found[("governor", "quoted key")] == Location(9, 1)
    assert found[("governor", "dotted", "inner")] == Location(10, 1)
    assert found[("governor", "dotted")] == Location(10, 1)
    assert found[("governor", "after")] == Location(15, 1)
    assert found[("instances", 0, "name")] == Location(18, 1)
    assert found[("instances", 1, "name")] == Location(20, 3)
    assert found[("metrics", "deep", "port")] == Location(22, 1)


def test_lines_inside_multiline_strings_and_arrays_are_not_keys() -> None:
    found = locate_keys(DOCUMENT)
    assert ("governor", "fake") not in found
    assert ("fake",) not in found
    assert not any("/a" in str(path) for path in found)


def test_nearest_location_falls_back_to_the_closest_ancestor() -> None:
    found = locate_keys(DOCUMENT)
    assert nearest_location(found, ("metrics", "deep", "port", "value")) == Location(22, 1)
    assert nearest_location(found, ("governor", "missing")) == Location(3, 2)
    assert nearest_location(found, ("nowhere",)) == Location(1, 1)


_names = st.text(alphabet="abcxyz_", min_size=1, max_size=6)
# Values full of the characters a naive scanner trips on.
_values = st.integers(-5, 5) | st.text(alphabet=" #[]={}'ab", max_size=8)


@given(st.dictionaries(_names, st.dictionaries(_names, _values, max_size=4), max_size=4))
def test_every_written_key_is_found_on_its_own_line(
    document: dict[str, dict[str, int | str]],
) -> None:
    lines: list[str] = []
    expected: dict[tuple[str, ...], int] = {}
    for table, keys in document.items():
        lines.append(f"[{table}]")
        expected[(table,)] = len(lines)
        for key, value in keys.items():
            lines.append(
                f'{key} = "{value}"  # note' if isinstance(value, str) else f"{key} = {value}"
            )
            expected[(table, key)] = len(lines)
    found = locate_keys("\n".join(lines))
    assert {path: found[path].line for path in expected} == expected
    assert set(found) == set(expected)
