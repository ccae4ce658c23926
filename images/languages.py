"""The toolchain images: what each language's image adds to the sandbox image.

A language image is the lean sandbox image (harness, wheels, uid 10001, no
setuid files) plus one toolchain installed from Debian bookworm's own
packages: the packages named here and their dependencies, resolved and
fetched on the host (`rewardbox.images.build`), installed in a build without
network. Which argv compiles and runs a program is the sandbox's language
table (`rewardbox.sandbox.languages`); this module only says what the image
holds. Pure: nothing here talks to Docker or apt.

Its tag is `rewardbox.images.language_tag`: the version and `language_digest`.

>>> len(language_digest("cpp", "rewardbox/python:0.1.0-abc"))
12
>>> language_digest("cpp", "a") != language_digest("cpp", "b")
True
"""
from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DEBIAN_SUITE",
    "DEBS_LABEL",
    "INSTALL",
    "FROM_LABEL",
    "JAVAC_JVM_FLAGS",
    "LANGUAGE_IMAGES",
    "LANGUAGE_LABEL",
    "LanguageImage",
    "USER",
    "WORKDIR",
    "language_digest",
    "language_of_tag",
]

# The suite of the sandbox image's base (rewardbox/debian-base or python:3.11-slim-bookworm).
DEBIAN_SUITE = "bookworm"
# A language image's labels beyond the sandbox image's (which it inherits: harness, packages, modules).
LANGUAGE_LABEL = "rewardbox.language"
FROM_LABEL = "rewardbox.from"  # the sandbox image it was built on
DEBS_LABEL = "rewardbox.debs"  # a JSON list of the Debian packages installed, name=version


class LanguageImage(BaseModel):
    """One toolchain: the Debian packages to install (their dependencies come
    along) and shell lines run as root after the install (warm-ups such as
    precompiled headers). Both are part of the image's tag."""

    model_config = ConfigDict(frozen=True)

    packages: tuple[str, ...]
    setup: tuple[str, ...] = ()


# The precompiled bits/stdc++.h for the flags the sandbox compiles with (C++17
# and C++20, -O2 -DONLINE_JUDGE). g++ looks in a `<header>.gch` directory and
# takes the first file whose flags match; a mismatch falls back to parsing the
# header (same result, slower), so a PCH can never change what compiles.
_PCH = (
    'bits="/usr/include/$(gcc -print-multiarch)/c++/12/bits"',
    'mkdir -p "$bits/stdc++.h.gch"',
    'for std in c++17 c++20; do'
    ' g++ -std=$std -O2 -pipe -DONLINE_JUDGE -x c++-header "$bits/stdc++.h" -o "$bits/stdc++.h.gch/$std.gch";'
    ' done',
    'chmod -R a-w,a+rX "$bits/stdc++.h.gch"',
)

# javac's JVM flags in the sandbox's language table (rewardbox.sandbox.languages' java compile
# argv, which this package cannot import: tests/unit/test_language_packages.py holds them equal).
JAVAC_JVM_FLAGS = ("-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1")
# A program that makes javac load what contest code needs of it: generics, lambdas and method
# references, streams, records, switch expressions, var, nested, anonymous and enum classes.
_JAVA_WARM_UP = (
    "import java.io.*;", "import java.util.*;", "import java.util.function.*;", "import java.util.stream.*;",
    "public class Main {",
    "    record Pair(long a, long b) implements Comparable<Pair> {",
    "        public int compareTo(Pair o) { return Long.compare(a, o.a); } }",
    "    enum Op { ADD, MUL }",
    "    static <T extends Comparable<T>> T best(List<T> xs) { return Collections.max(xs); }",
    "    public static void main(String[] args) throws IOException {",
    "        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));",
    "        var st = new StringTokenizer(\"3 1 2\");",
    "        List<Pair> ps = new ArrayList<>();",
    "        while (st.hasMoreTokens()) { long x = Long.parseLong(st.nextToken()); ps.add(new Pair(x, x * x)); }",
    "        Map<Long, List<Pair>> by = ps.stream().collect(Collectors.groupingBy(p -> p.a() % 2));",
    "        Function<Long, Long> f = x -> switch (Op.values()[(int) (x % 2)]) { case ADD -> x + 1; case MUL -> x * 2; };",
    "        Runnable r = new Runnable() { public void run() { System.out.println(best(ps)); } };",
    "        r.run();",
    "        PriorityQueue<int[]> pq = new PriorityQueue<>((u, v) -> Integer.compare(u[0], v[0]));",
    "        pq.add(new int[] {1, 2});",
    "        StringBuilder sb = new StringBuilder();",
    "        IntStream.range(0, 3).mapToObj(Integer::toString).forEach(sb::append);",
    "        System.out.printf(\"%s %d %s%n\", by.keySet(), f.apply(3L), sb);",
    "    }",
    "}",
)
# A class data sharing archive of the classes javac loads (the JDK's own list of the JVM's
# start-up classes and javac's, recorded compiling the program above with the sandbox's flags),
# dumped over the JDK's default archive, which every `java` and `javac` maps read-only without a
# flag: javac starts in ~0.35 s instead of ~0.5 s. Dumped with the serial collector the runs use
# (no archived heap objects: the JDK maps those with G1 only). A JVM whose flags do not fit the
# archive runs without it, never differently.
_JAVA_CDS = (
    'jdk="$(dirname "$(dirname "$(readlink -f /usr/bin/javac)")")"',  # /usr/lib/jvm/java-17-openjdk-<arch>
    'cd "$(mktemp -d)"',
    "printf '%s\\n' " + " ".join("'" + line.replace("'", "'\\''") + "'" for line in _JAVA_WARM_UP) + " > Main.java",
    f"javac -encoding UTF-8 -proc:none {' '.join(JAVAC_JVM_FLAGS)} -J-XX:DumpLoadedClassList=javac.classlist Main.java",
    'cat "$jdk/lib/classlist" javac.classlist > all.classlist',
    'java -Xshare:dump -XX:+UseSerialGC -XX:SharedClassListFile=all.classlist'
    ' -XX:SharedArchiveFile="$jdk/lib/server/classes.jsa" > /dev/null',
    'chmod a+r,a-w "$jdk/lib/server/classes.jsa"',
    'cd / && rm -rf "$OLDPWD"',
)

# Debian's package ships the standard library built with cgo: under the sandbox's CGO_ENABLED=0,
# net, os/user and all that imports them (net/http, crypto/tls, ...: 27 packages) are stale, and a
# build with an empty GOCACHE compiled them from source, `net` in about 3 s of one idle core, past
# the 10 s compile deadline on a loaded host (a compile error the code did not earn). Installed
# again with the table's settings, in GOROOT (Go 1.19 still reads it), none is stale: such a
# program builds in about 0.5 s. The build cache it used is dropped.
_GO_STD = (
    'cache="$(mktemp -d)"',
    'GO111MODULE=off CGO_ENABLED=0 GOCACHE="$cache" go install std',
    'rm -rf "$cache"',
)

LANGUAGE_IMAGES: dict[str, LanguageImage] = {
    # g++-12 is bookworm's C++17/C++20 compiler; `g++` gives it its usual command names (g++, gcc, cpp).
    "cpp": LanguageImage(packages=("g++", "g++-12"), setup=_PCH),
    # javac and java 17 (ca-certificates-java's postinst builds the JDK's cacerts from the image's
    # certificates, offline).
    "java": LanguageImage(packages=("openjdk-17-jdk-headless",), setup=_JAVA_CDS),
    # Debian's own node (18.x), whatever node the host has: apt resolves against Debian's mirror only.
    "javascript": LanguageImage(packages=("nodejs",)),
    # golang-go gives golang-1.19-go its command names (/usr/bin/go); its standard library installed
    # again under the table's settings (_GO_STD).
    "go": LanguageImage(packages=("golang-go", "golang-1.19-go"), setup=_GO_STD),
    # rustc 1.85 (Provides: rustc; bookworm's rustc is 1.63); gcc comes as its dependency, its linker.
    "rust": LanguageImage(packages=("rustc-web",)),
}

# The toolchain layer on top of the sandbox image, made in a container of it with
# no network, as root, then committed (one layer: the .debs handed in are gone
# from it, where a Dockerfile's COPY would keep their 60 MB in a layer of their
# own): the .debs fetched on the host are installed (documentation, manuals and
# translations left out, the copyright files kept; man1 made all the same, where
# update-alternatives links the JDK's pages and fails if it is missing), setup runs, setuid and
# setgid bits are stripped again (a package may bring some). The image then
# runs as the sandbox user in /work, like the one it is built on (USER, WORKDIR).
INSTALL = """\
mkdir -p /usr/share/man/man1
dpkg -i --path-exclude='/usr/share/doc/*' --path-include='/usr/share/doc/*/copyright' \\
  --path-exclude='/usr/share/man/*' --path-exclude='/usr/share/info/*' --path-exclude='/usr/share/locale/*' \\
  /tmp/toolchain/debs/*.deb
sh -eu /tmp/toolchain/setup.sh
rm -rf /tmp/toolchain /var/log/dpkg.log /var/log/apt /var/cache/debconf/*-old
find / -xdev -perm /6000 -type f -exec chmod a-s {} +
"""
USER = "10001:10001"
WORKDIR = "/work"


def language_digest(language: str, python: str) -> str:
    """12 hex digits of SHA-256 over what the image is made of: the sandbox
    image it is built on (its tag `python`), the suite, the packages, the setup,
    the install script and the image's user and work dir. A change of any of
    them names a new image."""
    entry = _entry(language)
    inputs = [python, DEBIAN_SUITE, language, sorted(entry.packages), list(entry.setup), INSTALL, USER, WORKDIR]
    return hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:12]


def language_of_tag(image: str) -> str | None:
    """The language whose image repository `image` is in (any version), else None.

    >>> language_of_tag("rewardbox/cpp:0.1.0-abc"), language_of_tag("rewardbox/python:0.1.0-abc")
    ('cpp', None)
    """
    repository = image.rsplit(":", 1)[0]
    for language in LANGUAGE_IMAGES:
        if repository == f"rewardbox/{language}":
            return language
    return None


def _entry(language: str) -> LanguageImage:
    try:
        return LANGUAGE_IMAGES[language]
    except KeyError:
        raise ValueError(f"no image for language {language!r}: one of {', '.join(sorted(LANGUAGE_IMAGES))}") from None
