"""Runs a command and passes when its output matches a pattern, as ctest's
PASS_REGULAR_EXPRESSION would ('.' spans lines; the output is passed through,
so SKIP_REGULAR_EXPRESSION still sees it), with the law counts of the pattern
read from the registry rather than written in: {GROUP+GROUP...} is the number
of laws `attncheck laws` lists in those groups, {GROUP-N} that less N.
A law joining a group then changes no test that counts the group's laws.

Usage: expect_output.py ATTNCHECK PATTERN COMMAND...
"""
import re
import subprocess
import sys


def law_counts(attncheck):
    listed = subprocess.run([attncheck, "laws"], check=True, capture_output=True, text=True).stdout
    counts = {}
    for line in listed.splitlines():
        if line and not line[0].isspace():
            group = line.split(".", 1)[0]
            counts[group] = counts.get(group, 0) + 1
    return counts


def expand(pattern, counts):
    def count(m):
        groups, less = m.group(1).split("+"), int(m.group(2) or 0)
        unknown = [g for g in groups if g not in counts]
        if unknown:
            sys.exit(f"expect_output: no law of group {', '.join(unknown)} in `attncheck laws`")
        return str(sum(counts[g] for g in groups) - less)

    return re.sub(r"\{([a-z_]+(?:\+[a-z_]+)*)(?:-([0-9]+))?\}", count, pattern)


def main():
    attncheck, pattern, command = sys.argv[1], sys.argv[2], sys.argv[3:]
    pattern = expand(pattern, law_counts(attncheck))
    run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    sys.stdout.write(run.stdout)
    if re.search(pattern, run.stdout, re.DOTALL):
        return 0
    print(f"expect_output: the output does not match {pattern!r}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
