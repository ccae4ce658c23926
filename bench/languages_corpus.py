"""The corpus of `bench/languages.py`: contest-style stdio problems written for
rewardbox (no external data), each with a Python reference that makes its
expected outputs (so a program's output is never its own yardstick), seeded
inputs, and programs in C++ (every problem) and in Java, JavaScript, Go and
Rust (four of them).

A sample is a program and its intended class: `ok` (accepted), `alt` (accepted,
written with the headers it needs instead of bits/stdc++.h: no precompiled
header helps it), `wrong` (a subtle bug: an overflow, an off-by-one, a bound),
`compile` (a typo the compiler or `node --check` rejects), `runtime` (exits
non-zero) and `tle` (loops on its last input: one in the corpus, it holds a
worker for an input's whole time limit). Every variant but `ok` and `alt` is the `ok`
program with one edit, so a sample differs from its accepted program only
where it must.

    >>> cpp = samples("cpp")
    >>> len(cpp), sorted({s.kind for s in cpp})
    (44, ['alt', 'compile', 'ok', 'runtime', 'tle', 'wrong'])
    >>> {lang: len(samples(lang)) for lang in ("java", "javascript", "go", "rust")}
    {'java': 12, 'javascript': 12, 'go': 12, 'rust': 12}
"""

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

# Which class each variant must get, from either judge. A program past an input's
# time limit (the label's case_timeout_s) fails that input's test: the run goes on.
EXPECTED = {"ok": "passed", "alt": "passed", "wrong": "failed", "compile": "compile_error", "runtime": "failed",
            "tle": "failed"}

Edit = tuple[str, str]


@dataclass(frozen=True)
class Problem:
    name: str
    solve: Callable[[str], str]  # the reference: an input's expected output
    inputs: Callable[[random.Random], list[str]]
    programs: dict[str, str]  # the accepted program by language
    edits: dict[str, dict[str, Edit]] = field(default_factory=dict)  # language -> variant -> (old, new)
    alt: dict[str, str] = field(default_factory=dict)  # language -> another accepted program


@dataclass(frozen=True)
class LangSample:
    id: str
    language: str
    kind: str
    code: str
    inputs: list[str]
    outputs: list[str]

    @property
    def expected(self) -> str:
        return EXPECTED[self.kind]

    def label(self, case_timeout_s: float) -> dict:
        return {"language": self.language, "inputs": self.inputs, "outputs": self.outputs,
                "case_timeout_s": case_timeout_s}

    def completion(self) -> str:
        return f"```{self.language}\n{self.code}```\n"


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split()]


def _array(rng: random.Random, n: int, lo: int, hi: int) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def _array_input(values: list[int], head: str = "") -> str:
    return f"{head or len(values)}\n{' '.join(map(str, values))}\n"


# -- the problems --------------------------------------------------------------

def _sum(text: str) -> str:
    n, *a = _ints(text)
    return f"{sum(a[:n])}\n"


def _sum_inputs(rng: random.Random) -> list[str]:
    return [_array_input(_array(rng, n, -10**9, 10**9)) for n in (1, 5, 2000, 20000)] + [
        _array_input([10**9] * 50)]


SUM = Problem("sum", _sum, _sum_inputs, {
    "cpp": """#include <bits/stdc++.h>
using namespace std;

int main() {
    ios::sync_with_stdio(false);
    cin.tie(nullptr);
    int n;
    cin >> n;
    long long s = 0;
    for (int i = 0; i < n; i++) {
        long long x;
        cin >> x;
        s += x;
    }
    cout << s << "\\n";
    return 0;
}
""",
    "java": """import java.util.*;

public class Main {
    public static void main(String[] args) throws Exception {
        String[] t = new String(System.in.readAllBytes()).trim().split("\\\\s+");
        int n = Integer.parseInt(t[0]);
        long s = 0;
        for (int i = 1; i <= n; i++) {
            s += Long.parseLong(t[i]);
        }
        System.out.println(s);
    }
}
""",
    "javascript": """const t = require("fs").readFileSync(0, "utf8").split(/\\s+/).filter((x) => x.length);
const n = Number(t[0]);
let s = 0n;
for (let i = 1; i <= n; i++) {
    s += BigInt(t[i]);
}
console.log(s.toString());
""",
    "go": """package main

import (
\t"bufio"
\t"fmt"
\t"os"
)

func main() {
\tin := bufio.NewReader(os.Stdin)
\tvar n int
\tfmt.Fscan(in, &n)
\tvar s int64
\tfor i := 0; i < n; i++ {
\t\tvar x int64
\t\tfmt.Fscan(in, &x)
\t\ts += x
\t}
\tfmt.Println(s)
}
""",
    "rust": """use std::io::Read;

fn main() {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).unwrap();
    let mut it = text.split_whitespace().map(|x| x.parse::<i64>().unwrap());
    let n = it.next().unwrap() as usize;
    let s: i64 = it.take(n).sum();
    println!("{}", s);
}
""",
}, edits={
    "cpp": {"wrong": ("long long s = 0;", "int s = 0;"), "compile": ("long long s = 0;", "long long s = 0"),
            "runtime": ("return 0;", "return 3;")},
    "java": {"wrong": ("long s = 0;", "int s = 0;"), "compile": ("long s = 0;", "long s = 0")},
    "javascript": {"wrong": ("s += BigInt(t[i]);", "s += BigInt(t[i]) % 1000000000n;"),
                   "compile": ("for (let i = 1; i <= n; i++) {", "for (let i = 1; i <= n; i++) {{")},
    "go": {"wrong": ("s += x", "s += x % 1000000000"), "compile": ("var s int64", "var s int64 =")},
    "rust": {"wrong": ("let s: i64 = it.take(n).sum();", "let s: i64 = it.take(n).map(|x| x % 1000000000).sum();"),
             "compile": ("let s: i64 = it.take(n).sum();", "let s: i64 = it.take(n).sum()")},
}, alt={"cpp": """#include <iostream>

int main() {
    int n;
    std::cin >> n;
    long long s = 0;
    while (n--) {
        long long x;
        std::cin >> x;
        s += x;
    }
    std::cout << s << std::endl;
}
"""})


def _kadane(text: str) -> str:
    n, *a = _ints(text)
    best, cur = -math.inf, 0
    for x in a[:n]:
        cur = max(x, cur + x)
        best = max(best, cur)
    return f"{best}\n"


KADANE = Problem("max-subarray", _kadane, lambda rng: [
    _array_input(_array(rng, n, -10**6, 10**6)) for n in (1, 10, 5000)] + [_array_input(_array(rng, 100, -50, -1))], {
    "cpp": """#include <bits/stdc++.h>
using namespace std;

int main() {
    int n;
    scanf("%d", &n);
    long long best = LLONG_MIN, cur = 0;
    for (int i = 0; i < n; i++) {
        long long x;
        scanf("%lld", &x);
        cur = max(x, cur + x);
        best = max(best, cur);
    }
    printf("%lld\\n", best);
    return 0;
}
"""}, edits={"cpp": {"wrong": ("best = LLONG_MIN", "best = 0"),
                    "compile": ("cur = max(x, cur + x);", "cur = max(x, cur + x, );")}})


def _distinct(text: str) -> str:
    n, *a = _ints(text)
    return f"{len(set(a[:n]))}\n"


DISTINCT = Problem("distinct", _distinct, lambda rng: [
    _array_input(_array(rng, n, 1, hi)) for n, hi in ((1, 5), (20, 5), (3000, 1000), (20000, 10**9))], {
    "cpp": """#include <bits/stdc++.h>
using namespace std;

int main() {
    int n;
    cin >> n;
    vector<int> a(n);
    for (auto &x : a) cin >> x;
    sort(a.begin(), a.end());
    cout << unique(a.begin(), a.end()) - a.begin() << "\\n";
    return 0;
}
""",
    "java": """import java.util.*;

public class Main {
    public static void main(String[] args) throws Exception {
        String[] t = new String(System.in.readAllBytes()).trim().split("\\\\s+");
        int n = Integer.parseInt(t[0]);
        HashSet<Integer> seen = new HashSet<>();
        for (int i = 1; i <= n; i++) {
            seen.add(Integer.parseInt(t[i]));
        }
        System.out.println(seen.size());
    }
}
""",
    "javascript": """const t = require("fs").readFileSync(0, "utf8").split(/\\s+/).filter((x) => x.length);
const n = Number(t[0]);
const seen = new Set();
for (let i = 1; i <= n; i++) {
    seen.add(Number(t[i]));
}
console.log(seen.size);
""",
    "go": """package main

import (
\t"bufio"
\t"fmt"
\t"os"
)

func main() {
\tin := bufio.NewReader(os.Stdin)
\tvar n int
\tfmt.Fscan(in, &n)
\tseen := map[int]bool{}
\tfor i := 0; i < n; i++ {
\t\tvar x int
\t\tfmt.Fscan(in, &x)
\t\tseen[x] = true
\t}
\tfmt.Println(len(seen))
}
""",
    "rust": """use std::collections::HashSet;
use std::io::Read;

fn main() {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).unwrap();
    let mut it = text.split_whitespace().map(|x| x.parse::<i64>().unwrap());
    let n = it.next().unwrap() as usize;
    let seen: HashSet<i64> = it.take(n).collect();
    println!("{}", seen.len());
}
""",
}, edits={
    "cpp": {"wrong": ("    sort(a.begin(), a.end());\n", ""), "compile": ("vector<int> a(n);", "vector<int> a(n)")},
    "java": {"wrong": ("seen.size()", "(seen.size() - (n > 1000 ? 1 : 0))"),
             "compile": ("seen.add(Integer.parseInt(t[i]));", "seen.add(Integer.parseInt(t[i]);")},
    "javascript": {"wrong": ("seen.add(Number(t[i]));", "seen.add(Number(t[i]) % 1000);"),
                   "compile": ("seen.add(Number(t[i]));", "seen.add(Number(t[i]);")},
    "go": {"wrong": ("seen[x] = true", "seen[x%1000] = true"), "compile": ("seen[x] = true", "seen[x] = true)")},
    "rust": {"wrong": ("it.take(n).collect();", "it.take(n).map(|x| x % 1000).collect();"),
             "compile": ("it.take(n).collect();", "it.take(n).collect()")},
}, alt={"cpp": """#include <algorithm>
#include <iostream>
#include <vector>

int main() {
    int n;
    std::cin >> n;
    std::vector<int> a(n);
    for (int i = 0; i < n; i++) std::cin >> a[i];
    std::sort(a.begin(), a.end());
    int count = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || a[i] != a[i - 1]) count++;
    std::cout << count << '\\n';
}
"""})


def _gcdlcm(text: str) -> str:
    t, *rest = _ints(text)
    lines = []
    for i in range(t):
        a, b = rest[2 * i], rest[2 * i + 1]
        g = math.gcd(a, b)
        lines.append(f"{g} {a // g * b}")
    return "\n".join(lines) + "\n"


def _gcdlcm_inputs(rng: random.Random) -> list[str]:
    out = []
    for t in (1, 10, 2000):
        pairs = [(rng.randint(1, 10**6), rng.randint(1, 10**6)) for _ in range(t)]
        out.append(f"{t}\n" + "".join(f"{a} {b}\n" for a, b in pairs))
    return out


GCDLCM = Problem("gcd-lcm", _gcdlcm, _gcdlcm_inputs, {
    "cpp": """#include <bits/stdc++.h>
using namespace std;

int main() {
    int t;
    cin >> t;
    while (t--) {
        long long a, b;
        cin >> a >> b;
        long long g = __gcd(a, b);
        long long l = a / g * b;
        cout << g << " " << l << "\\n";
    }
    return 0;
}
""",
    "java": """import java.util.*;

public class Main {
    static long gcd(long a, long b) {
        return b == 0 ? a : gcd(b, a % b);
    }

    public static void main(String[] args) throws Exception {
        String[] t = new String(System.in.readAllBytes()).trim().split("\\\\s+");
        int n = Integer.parseInt(t[0]);
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < n; i++) {
            long a = Long.parseLong(t[1 + 2 * i]), b = Long.parseLong(t[2 + 2 * i]);
            long g = gcd(a, b);
            out.append(g).append(' ').append(a / g * b).append('\\n');
        }
        System.out.print(out);
    }
}
""",
    "javascript": """const t = require("fs").readFileSync(0, "utf8").split(/\\s+/).filter((x) => x.length).map(Number);
const gcd = (a, b) => (b === 0 ? a : gcd(b, a % b));
const out = [];
for (let i = 0; i < t[0]; i++) {
    const a = t[1 + 2 * i], b = t[2 + 2 * i];
    const g = gcd(a, b);
    out.push(`${g} ${(a / g) * b}`);
}
console.log(out.join("\\n"));
""",
    "go": """package main

import (
\t"bufio"
\t"fmt"
\t"os"
)

func gcd(a, b int64) int64 {
\tfor b != 0 {
\t\ta, b = b, a%b
\t}
\treturn a
}

func main() {
\tin := bufio.NewReader(os.Stdin)
\tout := bufio.NewWriter(os.Stdout)
\tdefer out.Flush()
\tvar t int
\tfmt.Fscan(in, &t)
\tfor ; t > 0; t-- {
\t\tvar a, b int64
\t\tfmt.Fscan(in, &a, &b)
\t\tg := gcd(a, b)
\t\tfmt.Fprintln(out, g, a/g*b)
\t}
}
""",
    "rust": """use std::io::{Read, Write};

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn main() {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).unwrap();
    let v: Vec<u64> = text.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let mut out = String::new();
    for i in 0..v[0] as usize {
        let (a, b) = (v[1 + 2 * i], v[2 + 2 * i]);
        let g = gcd(a, b);
        out.push_str(&format!("{} {}\\n", g, a / g * b));
    }
    std::io::stdout().write_all(out.as_bytes()).unwrap();
}
""",
}, edits={
    "cpp": {"wrong": ("long long l = a / g * b;", "int l = a / g * b;"),
            "compile": ("long long g = __gcd(a, b);", "long long g = gcd_of(a, b);")},
    "java": {"wrong": ("append(a / g * b)", "append((int) (a / g * b))"),
             "compile": ("long g = gcd(a, b);", "long g = gcd(a, b, 0);")},
    "javascript": {"wrong": ("${(a / g) * b}", "${((a / g) * b) | 0}"),
                   "compile": ("const g = gcd(a, b);", "const g = = gcd(a, b);")},
    "go": {"wrong": ("fmt.Fprintln(out, g, a/g*b)", "fmt.Fprintln(out, g, int32(a/g*b))"),
           "compile": ("g := gcd(a, b)", "g := gcd(a, b, 0)")},
    "rust": {"wrong": ("a / g * b));", "(a / g * b) as u32));"),
             "compile": ("let g = gcd(a, b);", "let g = gcd(a, b, 0);")},
})


def _reverse(text: str) -> str:
    return text.strip()[::-1] + "\n"


REVERSE = Problem("reverse", _reverse, lambda rng: [
    "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n)) + "\n" for n in (1, 7, 1000, 100000)], {
    "cpp": """#include <bits/stdc++.h>
using namespace std;

int main() {
    string s;
    getline(cin, s);
    reverse(s.begin(), s.end());
    cout << s << "\\n";
    return 0;
}
"""}, edits={"cpp": {"wrong": ("reverse(s.begin(), s.end());", "reverse(s.begin() + 1, s.end());"),
                    "compile": ("string s;", "string s = 0.5;")}},
    alt={"cpp": """#include <iostream>
#include <string>

int main() {
    std::string s;
    std::cin >> s;
    for (size_t i = s.size(); i-- > 0;) std::cout << s[i];
    std::cout << '\\n';
    return 0;
}
"""})


def _primes(text: str) -> str:
    n = int(text)
    sieve = bytearray([1]) * (n + 1)
    sieve[0:2] = b"\0\0"[:min(2, n + 1)]
    for i in range(2, math.isqrt(n) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytes(len(range(i * i, n + 1, i)))
    return f"{sum(sieve)}\n"


PRIMES = Problem("primes", _primes, lambda rng: ["1\n", "49\n", "121\n", "2000000\n"], {
    "cpp": """#include <bits/stdc++.h>
using namespace std;

int main() {
    int n;
    cin >> n;
    vector<char> composite(n + 1, 0);
    int count = 0;
    for (long long i = 2; i * i <= n; i++)
        if (!composite[i])
            for (long long j = i * i; j <= n; j += i) composite[j] = 1;
    for (int i = 2; i <= n; i++) count += !composite[i];
    cout << count << "\\n";
    return 0;
}
"""}, edits={"cpp": {"wrong": ("i * i <= n", "i * i < n"), "compile": ("int count = 0;", "int count = 0;;}"),
                    "runtime": ("cout << count", "if (n > 1000000) abort();\n    cout << count")}})


def _fib(text: str) -> str:
    n = int(text)
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % 1_000_000_007
    return f"{a}\n"


FIB = Problem("fibonacci", _fib, lambda rng: ["0\n", "1\n", "90\n", "1000000\n"], {
    "cpp": """#include <bits/stdc++.h>
using namespace std;
const long long MOD = 1000000007;

int main() {
    int n;
    cin >> n;
    long long a = 0, b = 1;
    for (int i = 0; i < n; i++) {
        long long c = (a + b) % MOD;
        a = b;
        b = c;
    }
    cout << a << "\\n";
    return 0;
}
"""}, edits={"cpp": {"wrong": ("1000000007", "1000000009"), "compile": ("long long c", "long long long c"),
                    # Loops forever on its last input only: the corpus's one time limit.
                    "tle": ("for (int i = 0; i < n; i++) {", "for (int i = 0; i < n; i += (n < 1000000)) {")}})


def _sort(text: str) -> str:
    n, *a = _ints(text)
    return " ".join(map(str, sorted(a[:n]))) + "\n"


SORT = Problem("sort", _sort, lambda rng: [
    _array_input(_array(rng, n, -10**9, 10**9)) for n in (1, 8, 1000, 20000)], {
    "cpp": """#include <bits/stdc++.h>
using namespace std;

int main() {
    ios::sync_with_stdio(false);
    cin.tie(nullptr);
    int n;
    cin >> n;
    vector<long long> a(n);
    for (auto &x : a) cin >> x;
    sort(a.begin(), a.end());
    for (int i = 0; i < n; i++) cout << a[i] << (i + 1 < n ? ' ' : '\\n');
    return 0;
}
""",
    "java": """import java.util.*;

public class Main {
    public static void main(String[] args) throws Exception {
        String[] t = new String(System.in.readAllBytes()).trim().split("\\\\s+");
        int n = Integer.parseInt(t[0]);
        long[] a = new long[n];
        for (int i = 0; i < n; i++) a[i] = Long.parseLong(t[i + 1]);
        Arrays.sort(a);
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < n; i++) out.append(a[i]).append(i + 1 < n ? ' ' : '\\n');
        System.out.print(out);
    }
}
""",
    "javascript": """const t = require("fs").readFileSync(0, "utf8").split(/\\s+/).filter((x) => x.length).map(Number);
const a = t.slice(1, 1 + t[0]);
a.sort((x, y) => x - y);
console.log(a.join(" "));
""",
    "go": """package main

import (
\t"bufio"
\t"fmt"
\t"os"
\t"sort"
\t"strconv"
\t"strings"
)

func main() {
\tin := bufio.NewReader(os.Stdin)
\tvar n int
\tfmt.Fscan(in, &n)
\ta := make([]int64, n)
\tfor i := range a {
\t\tfmt.Fscan(in, &a[i])
\t}
\tsort.Slice(a, func(i, j int) bool { return a[i] < a[j] })
\tparts := make([]string, n)
\tfor i, x := range a {
\t\tparts[i] = strconv.FormatInt(x, 10)
\t}
\tfmt.Println(strings.Join(parts, " "))
}
""",
    "rust": """use std::io::Read;

fn main() {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).unwrap();
    let mut it = text.split_whitespace().map(|x| x.parse::<i64>().unwrap());
    let n = it.next().unwrap() as usize;
    let mut a: Vec<i64> = it.take(n).collect();
    a.sort();
    let parts: Vec<String> = a.iter().map(|x| x.to_string()).collect();
    println!("{}", parts.join(" "));
}
""",
}, edits={
    "cpp": {"wrong": ("sort(a.begin(), a.end());", "sort(a.rbegin(), a.rend());"),
            "compile": ("vector<long long> a(n);", "vector<long long> a(n);\n    int a;")},
    "java": {"wrong": ("Arrays.sort(a);", "Arrays.sort(a, 1, n);"), "compile": ("Arrays.sort(a);", "Arrays.sort(a)")},
    "javascript": {"wrong": ("a.sort((x, y) => x - y);", "a.sort();"),
                   "compile": ("a.sort((x, y) => x - y);", "a.sort((x, y) => x - y;")},
    "go": {"wrong": ("return a[i] < a[j]", "return a[i]%1000 < a[j]%1000"),
           "compile": ("\t\"sort\"\n", "")},  # an unused or missing import is Go's compile error
    "rust": {"wrong": ("a.sort();", "a.sort_by_key(|x| x.abs());"), "compile": ("a.sort();", "a.sort(1);")},
}, alt={"cpp": """#include <algorithm>
#include <cstdio>
#include <vector>

int main() {
    int n;
    if (scanf("%d", &n) != 1) return 1;
    std::vector<long long> a(n);
    for (auto &x : a) scanf("%lld", &x);
    std::sort(a.begin(), a.end());
    for (int i = 0; i < n; i++) printf(i + 1 < n ? "%lld " : "%lld\\n", a[i]);
    return 0;
}
"""})


def _pairs(text: str) -> str:
    n, k, *a = _ints(text)
    seen: Counter[int] = Counter()
    count = 0
    for x in a[:n]:
        count += seen[k - x]
        seen[x] += 1
    return f"{count}\n"


PAIRS = Problem("pair-sum", _pairs, lambda rng: [
    _array_input(_array(rng, n, 0, hi), head=f"{n} {k}") for n, hi, k in ((2, 3, 4), (50, 20, 20), (20000, 1000, 1000))],
    {"cpp": """#include <bits/stdc++.h>
using namespace std;

int main() {
    int n;
    long long k;
    cin >> n >> k;
    unordered_map<long long, long long> seen;
    long long count = 0;
    for (int i = 0; i < n; i++) {
        long long x;
        cin >> x;
        auto it = seen.find(k - x);
        if (it != seen.end()) count += it->second;
        seen[x]++;
    }
    cout << count << "\\n";
    return 0;
}
"""}, edits={"cpp": {"wrong": ("auto it = seen.find(k - x);", "seen[x]++;\n        auto it = seen.find(k - x);"),
                    "compile": ("auto it = seen.find(k - x);", "auto it = seen.find(k - x)")}})


def _lis(text: str) -> str:
    import bisect

    n, *a = _ints(text)
    tails: list[int] = []
    for x in a[:n]:
        i = bisect.bisect_left(tails, x)
        tails[i:i + 1] = [x]
    return f"{len(tails)}\n"


LIS = Problem("lis", _lis, lambda rng: [
    _array_input(_array(rng, n, 1, hi)) for n, hi in ((1, 1), (30, 5), (5000, 100), (20000, 10**9))], {
    "cpp": """#include <bits/stdc++.h>
using namespace std;

int main() {
    int n;
    cin >> n;
    vector<int> tails;
    for (int i = 0; i < n; i++) {
        int x;
        cin >> x;
        auto it = lower_bound(tails.begin(), tails.end(), x);
        if (it == tails.end()) tails.push_back(x);
        else *it = x;
    }
    cout << tails.size() << "\\n";
    return 0;
}
"""}, edits={"cpp": {"wrong": ("lower_bound", "upper_bound"),
                    "compile": ("vector<int> tails;", "vector<int> tails")}})


def _components(text: str) -> str:
    n, m, *e = _ints(text)
    parent = list(range(n + 1))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    count = n
    for i in range(m):
        a, b = find(e[2 * i]), find(e[2 * i + 1])
        if a != b:
            parent[a] = b
            count -= 1
    return f"{count}\n"


def _components_inputs(rng: random.Random) -> list[str]:
    out = []
    for n, m in ((1, 0), (10, 12), (3000, 2000), (20000, 30000)):
        edges = [(rng.randint(1, n), rng.randint(1, n)) for _ in range(m)]
        out.append(f"{n} {m}\n" + "".join(f"{a} {b}\n" for a, b in edges))
    return out


COMPONENTS = Problem("components", _components, _components_inputs, {
    "cpp": """#include <bits/stdc++.h>
using namespace std;

vector<int> parent;

int find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
}

int main() {
    int n, m;
    cin >> n >> m;
    parent.resize(n + 1);
    iota(parent.begin(), parent.end(), 0);
    int count = n;
    for (int i = 0; i < m; i++) {
        int a, b;
        cin >> a >> b;
        a = find(a), b = find(b);
        if (a != b) {
            parent[a] = b;
            count--;
        }
    }
    cout << count << "\\n";
    return 0;
}
"""}, edits={"cpp": {"wrong": ("if (a != b) {", "{"), "compile": ("int find(int x) {", "int find(int x) {{"),
                    "runtime": ("parent.resize(n + 1);", "parent.resize(n + 1);\n    if (m > 20000) exit(1);")}})


def _queries(text: str) -> str:
    import bisect

    values = _ints(text)
    n, q = values[0], values[1]
    a = sorted(values[2:2 + n])
    return "\n".join(str(bisect.bisect_right(a, x)) for x in values[2 + n:2 + n + q]) + "\n"


def _queries_inputs(rng: random.Random) -> list[str]:
    out = []
    for n, q in ((1, 1), (20, 20), (20000, 10000)):
        a = _array(rng, n, 1, 1000)
        queries = [rng.choice(a) if rng.random() < 0.5 else rng.randint(0, 1001) for _ in range(q)]
        out.append(f"{n} {q}\n{' '.join(map(str, a))}\n{' '.join(map(str, queries))}\n")
    return out


QUERIES = Problem("count-at-most", _queries, _queries_inputs, {
    "cpp": """#include <bits/stdc++.h>
using namespace std;

int main() {
    ios::sync_with_stdio(false);
    cin.tie(nullptr);
    int n, q;
    cin >> n >> q;
    vector<int> a(n);
    for (auto &x : a) cin >> x;
    sort(a.begin(), a.end());
    while (q--) {
        int x;
        cin >> x;
        cout << upper_bound(a.begin(), a.end(), x) - a.begin() << "\\n";
    }
    return 0;
}
"""}, edits={"cpp": {"wrong": ("upper_bound", "lower_bound"),
                    "compile": ("cout << upper_bound", "cout << upper_bond")}})

PROBLEMS = (SUM, KADANE, DISTINCT, GCDLCM, REVERSE, PRIMES, FIB, SORT, PAIRS, LIS, COMPONENTS, QUERIES)
LANGUAGES = ("cpp", "java", "javascript", "go", "rust")


def samples(language: str, seed: int = 23, every: int = 1) -> list[LangSample]:
    """Every sample in `language` of every `every`-th problem, in a fixed order
    (the problems', then each's variants)."""
    out = []
    for problem in PROBLEMS[::every]:
        if language not in problem.programs:
            continue
        inputs = problem.inputs(random.Random(f"{seed}-{problem.name}"))
        outputs = [problem.solve(text) for text in inputs]
        ok = problem.programs[language]
        variants = {"ok": ok}
        if language in problem.alt:
            variants["alt"] = problem.alt[language]
        for kind, (old, new) in problem.edits.get(language, {}).items():
            if ok.count(old) != 1:
                raise ValueError(f"{problem.name} {language} {kind}: {old!r} is not in the program once")
            variants[kind] = ok.replace(old, new)
        out += [LangSample(f"{language}/{problem.name}/{kind}", language, kind, code, inputs, outputs)
                for kind, code in variants.items()]
    return out
