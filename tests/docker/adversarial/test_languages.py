"""The adversarial suite in every compiled (or checked) language: each attack
written as a model would write it in C++, Java, JavaScript, Go and Rust,
graded through `CodeReward` like any stdio label of the language, with the
verdict the limit it meets gives (and why, where languages differ).

Resources: a fork bomb, a memory bomb (touched pages past the limit), a flood
of output, an endless loop. The compiler: C++ templates and constexpr loops
that never end, headers included from /dev/zero, /dev/random and the
compiler's stdin, a static array of 1 TB, Rust's `include_bytes!` of
/dev/zero. The host: a scan of /proc (every process's command line,
environment, open files and memory), /tmp, /dev/shm, the work dir and the
environment for the expected output (the test data is in the test process's
memory only, and that process cannot be read), the network (no interface but
lo, so a connect to 10.255.255.1 fails inside the container without sending
anything), and a double-forked sleeper (gone after the run; the next run in
the same pooled container sees nothing of it). The `batch` fixture checks the
host after the module's runs (conftest.py); the attacks that must be
contained assert PASSED, that is, the program itself saw the defence hold.
"""

import os
import re
import time
from pathlib import Path

import pytest

from adversarial.attacks import GVISOR, QUICK, ROOMY, TOKEN, Attack, messages, show
from rewardbox.rewards import CodeReward, Sample
from rewardbox.sandbox import Limits, Verdict
from rewardbox.sandbox.languages import language
from rewardbox.sandbox.modes import DEFAULT_MODE, make_sandbox

pytestmark = pytest.mark.core

LANGUAGES = ("cpp", "java", "javascript", "go", "rust")  # every toolchain image; cpp20 shares cpp's
FORK_BOMB_VERDICTS = {Verdict.FAILED, Verdict.TIMEOUT, Verdict.OUT_OF_MEMORY, Verdict.KILLED, Verdict.OUTPUT_LIMIT}
ADD = {"inputs": ["1 2\n", "0 0\n", "-2 5\n"], "outputs": ["3\n", "0\n", "3\n"]}
LOOP_CASE_S = 1.0  # per case of the attacks that run until a limit stops them
# The compile (or check) step's deadline of every attack but the compile-time bombs, which
# meet the language's own: what is judged is the run's verdict, not the compiler's speed.
# CI's gVisor pass, the module's attacks at once on a loaded 2-core host, took `go build`
# and `node --check` past their 10 s.
COMPILE_S = 60.0
QUICK_COMPILE = Limits(timeout_s=QUICK.timeout_s, compile_timeout_s=COMPILE_S)
ROOMY_COMPILE = Limits(timeout_s=ROOMY.timeout_s, compile_timeout_s=COMPILE_S)
# A case of the sleepers' runs: what is judged is that the sleeper goes, not speed (a Node
# start and its shell under gVisor took 3 s a case on a loaded machine; the count's `sleep 1` too).
SLEEPER_CASE_S = 15
FLOOD_CASE_S = 10.0  # the output floods' one case: the cap, not this, stops them
ENGINE_WAIT_S = 30
# Names the double-forked sleeper ($0 of its shell) so that a process list finds it;
# the searches below spell it as a pattern that does not match itself ([l]eftover).
SLEEPER = f"leftover-{TOKEN}"
SLEEPER_PATTERN = f"[l]eftover-{TOKEN}"
# The read-expected attack's expected output, nowhere else. The programs hold it
# reversed and reverse it at run time: their own source and binary never hold it
# (javac and Go fold "EXP" + "ECTED" into one constant, which the scan of /work found).
SECRET = f"EXPECTED-{TOKEN}"
DETACH = f"setsid sh -c 'while :; do sleep 1; done' {SLEEPER} </dev/null >/dev/null 2>&1 &"
LIST_SLEEPERS = f"grep -l '{SLEEPER_PATTERN}' /proc/[0-9]*/cmdline 2>/dev/null | wc -l"


def label(lang: str, cases: dict | None = None, **extra) -> dict:
    return {"language": lang, **(cases or ADD), **extra}


def fenced(lang: str, code: str) -> str:
    return f"```{lang}\n{code.strip()}\n```\n"


# `add` read from stdin: the honest answers, and programs that do their harm first.
HONEST = {
    "cpp": "#include <iostream>\nint main() {{ long long a, b; std::cin >> a >> b; {harm}std::cout << {expr} << '\\n'; }}",
    "java": "import java.util.*;\npublic class Main {{\n  public static void main(String[] args) throws Exception {{\n"
            "    Scanner in = new Scanner(System.in); long a = in.nextLong(), b = in.nextLong();\n    {harm}"
            "System.out.println({expr});\n  }}\n}}",
    "javascript": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n{harm}"
                  "console.log({expr});",
    "go": "package main\n\nimport (\n\t\"fmt\"\n\t\"os/exec\"\n)\n\nvar _ = exec.Command\n\nfunc main() {{\n"
          "\tvar a, b int64\n\tfmt.Scan(&a, &b)\n\t{harm}fmt.Println({expr})\n}}",
    "rust": "use std::io::Read;\nfn main() {{\n    let mut s = String::new();\n"
            "    std::io::stdin().read_to_string(&mut s).unwrap();\n"
            "    let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
            "    let (a, b) = (v[0], v[1]);\n    {harm}println!(\"{{}}\", {expr});\n}}",
}


def honest(lang: str, expr: str = "a + b", harm: str = "") -> str:
    return HONEST[lang].format(expr=expr, harm=harm)


# A shell command run from the program, its stdout the program's (the detached
# sleeper, and the process list of the next run).
SHELL = {
    "cpp": "#include <cstdlib>\nint main() {{ return std::system(\"{cmd}\"); }}",
    "java": "public class Main {{\n  public static void main(String[] args) throws Exception {{\n"
            "    System.exit(new ProcessBuilder(\"sh\", \"-c\", \"{cmd}\").inheritIO().start().waitFor());\n  }}\n}}",
    "javascript": "require('child_process').execSync(\"{cmd}\", {{stdio: 'inherit'}});",
    "go": "package main\n\nimport (\n\t\"os\"\n\t\"os/exec\"\n)\n\n"
          "func main() {{\n\tc := exec.Command(\"sh\", \"-c\", \"{cmd}\")\n"
          "\tc.Stdout = os.Stdout\n\tc.Stderr = os.Stderr\n\tif c.Run() != nil {{\n\t\tos.Exit(1)\n\t}}\n}}",
    "rust": "fn main() {{\n    let s = std::process::Command::new(\"sh\").arg(\"-c\").arg(\"{cmd}\").status().unwrap();\n"
            "    std::process::exit(s.code().unwrap_or(1));\n}}",
}


def shell(lang: str, cmd: str) -> str:
    return SHELL[lang].format(cmd=cmd.replace("\\", "\\\\").replace('"', '\\"'))


FORK_BOMB = {
    "cpp": "#include <unistd.h>\nint main() { for (;;) fork(); }",
    "java": "public class Main {\n  public static void main(String[] args) {\n    while (true) {\n      try {\n"
            "        new ProcessBuilder(\"java\", \"-Xmx16m\", \"-cp\", \".\", \"Main\").start();\n"
            "      } catch (Exception e) { }\n    }\n  }\n}",
    "javascript": "const { spawn } = require('child_process');\nfor (;;) {\n  try {\n"
                  "    spawn(process.execPath, [__filename], { detached: true, stdio: 'ignore' });\n  } catch (e) { }\n}",
    "go": "package main\n\nimport \"syscall\"\n\nfunc main() {\n\tfor {\n"
          "\t\tsyscall.ForkExec(\"/proc/self/exe\", []string{\"main\"}, nil)\n\t}\n}",
    "rust": "fn main() {\n    loop {\n        let _ = std::process::Command::new(\"/proc/self/exe\").spawn();\n    }\n}",
}

# Memory touched 1 MiB at a time and kept, past any limit.
MEMORY_BOMB = {
    "cpp": "#include <cstdlib>\n#include <cstring>\n#include <cstdio>\n#include <vector>\n"
           "int main() {\n  std::vector<char*> kept;\n  for (;;) {\n    char* p = (char*)std::malloc(1 << 20);\n"
           "    if (!p) { std::puts(\"malloc failed\"); return 1; }\n    std::memset(p, 1, 1 << 20);\n"
           "    kept.push_back(p);\n  }\n}",
    "java": "import java.util.*;\npublic class Main {\n  public static void main(String[] args) {\n"
            "    List<byte[]> kept = new ArrayList<>();\n    while (true) {\n      byte[] b = new byte[1 << 20];\n"
            "      Arrays.fill(b, (byte) 1);\n      kept.add(b);\n    }\n  }\n}",
    "javascript": "const kept = [];\nfor (;;) kept.push(Buffer.alloc(1 << 20, 1));",
    "go": "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tvar kept [][]byte\n\tfor {\n\t\tb := make([]byte, 1<<20)\n"
          "\t\tfor i := range b {\n\t\t\tb[i] = 1\n\t\t}\n\t\tkept = append(kept, b)\n\t\tif len(kept) < 0 {\n"
          "\t\t\tfmt.Println(len(kept))\n\t\t}\n\t}\n}",
    "rust": "fn main() {\n    let mut kept: Vec<Vec<u8>> = Vec::new();\n    loop {\n        kept.push(vec![1u8; 1 << 20]);\n"
            "        if kept.len() == usize::MAX { println!(\"{}\", kept.len()); }\n    }\n}",
}

# 64 KiB lines on stdout without end.
OUTPUT_FLOOD = {
    "cpp": "#include <cstdio>\n#include <string>\nint main() {\n  std::string s(1 << 16, 'x');\n  s += '\\n';\n"
           "  for (;;) std::fwrite(s.data(), 1, s.size(), stdout);\n}",
    "java": "import java.io.*;\npublic class Main {\n  public static void main(String[] args) throws IOException {\n"
            "    byte[] s = (\"x\".repeat(1 << 16) + \"\\n\").getBytes();\n"
            "    OutputStream out = new BufferedOutputStream(new FileOutputStream(FileDescriptor.out));\n"
            "    while (true) out.write(s);\n  }\n}",
    "javascript": "const fs = require('fs');\nconst s = 'x'.repeat(1 << 16) + '\\n';\nfor (;;) fs.writeSync(1, s);",
    "go": "package main\n\nimport (\n\t\"os\"\n\t\"strings\"\n)\n\nfunc main() {\n"
          "\ts := []byte(strings.Repeat(\"x\", 1<<16) + \"\\n\")\n\tfor {\n\t\tos.Stdout.Write(s)\n\t}\n}",
    "rust": "use std::io::Write;\nfn main() {\n    let s = \"x\".repeat(1 << 16) + \"\\n\";\n"
            "    let mut out = std::io::stdout().lock();\n"
            "    loop {\n        if out.write_all(s.as_bytes()).is_err() { break; }\n"
            "    }\n}",
}
STDERR_FLOOD = {
    "cpp": OUTPUT_FLOOD["cpp"].replace("stdout", "stderr"),
    "java": OUTPUT_FLOOD["java"].replace("FileDescriptor.out", "FileDescriptor.err"),
    "javascript": OUTPUT_FLOOD["javascript"].replace("writeSync(1", "writeSync(2"),
    "go": OUTPUT_FLOOD["go"].replace("os.Stdout", "os.Stderr"),
    "rust": OUTPUT_FLOOD["rust"].replace("stdout()", "stderr()"),
}

INFINITE_LOOP = {
    "cpp": "int main() { volatile unsigned long n = 0; for (;;) n++; }",
    "java": "public class Main {\n  public static void main(String[] args) {\n    long n = 0;\n"
            "    while (n >= 0) n = (n + 1) & 0xffff;\n  }\n}",
    "javascript": "let n = 0;\nfor (;;) n = (n + 1) & 0xffff;",
    "go": "package main\n\nfunc main() {\n\tn := 0\n\tfor n >= 0 {\n\t\tn = (n + 1) & 0xffff\n\t}\n}",
    "rust": "fn main() {\n    let mut n: u64 = 0;\n    loop {\n        n = std::hint::black_box((n + 1) & 0xffff);\n    }\n}",
}

# The network: first the interfaces (/proc/net/dev); only with none but lo does
# the program try 10.255.255.1, which then fails in the container without a packet sent.
NETWORK = {
    "cpp": r'''
#include <arpa/inet.h>
#include <cerrno>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fstream>
#include <iostream>
#include <string>
int main() {
    std::ifstream dev("/proc/net/dev");
    std::string line, names;
    for (int i = 0; std::getline(dev, line); i++)
        if (i >= 2) names += line.substr(0, line.find(':')) + ",";
    names.erase(0, names.find_first_not_of(' '));
    if (names.find_first_not_of(' ') == std::string::npos || names != "lo,") {
        std::cout << "interfaces: " << names << "\n";
        return 0;
    }
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(80);
    inet_pton(AF_INET, "10.255.255.1", &to.sin_addr);
    int r = connect(s, (sockaddr*)&to, sizeof to);
    if (r != 0 && errno == EINPROGRESS) {
        pollfd p{s, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof err;
        r = (poll(&p, 1, 1000) == 1 && getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) ? 0 : -1;
    }
    std::cout << (r == 0 ? "connected" : "contained") << "\n";
}
''',
    "java": r'''
import java.net.*;
import java.nio.file.*;
import java.util.*;
public class Main {
    public static void main(String[] args) throws Exception {
        List<String> names = new ArrayList<>();
        List<String> lines = Files.readAllLines(Paths.get("/proc/net/dev"));
        for (String l : lines.subList(2, lines.size())) names.add(l.split(":")[0].trim());
        if (!names.equals(List.of("lo"))) {
            System.out.println("interfaces: " + names);
            return;
        }
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("10.255.255.1", 80), 1000);
            System.out.println("connected");
        } catch (Exception e) {
            System.out.println("contained");
        }
    }
}
''',
    "javascript": r'''
const fs = require('fs');
const net = require('net');
const names = fs.readFileSync('/proc/net/dev', 'utf8').split('\n').slice(2).filter(Boolean)
  .map((l) => l.split(':')[0].trim());
if (names.join(',') !== 'lo') {
  console.log('interfaces: ' + names.join(','));
} else {
  const s = net.connect({ host: '10.255.255.1', port: 80 });
  const done = (what) => { console.log(what); s.destroy(); process.exit(0); };
  s.setTimeout(1000, () => done('contained'));
  s.on('connect', () => done('connected'));
  s.on('error', () => done('contained'));
}
''',
    "go": r'''
package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	data, _ := os.ReadFile("/proc/net/dev")
	var names []string
	for i, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if i >= 2 {
			names = append(names, strings.TrimSpace(strings.Split(l, ":")[0]))
		}
	}
	if strings.Join(names, ",") != "lo" {
		fmt.Println("interfaces:", names)
		return
	}
	if c, err := net.DialTimeout("tcp", "10.255.255.1:80", time.Second); err == nil {
		c.Close()
		fmt.Println("connected")
	} else {
		fmt.Println("contained")
	}
}
''',
    "rust": r'''
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
fn main() {
    let dev = std::fs::read_to_string("/proc/net/dev").unwrap();
    let names: Vec<&str> = dev.lines().skip(2).map(|l| l.split(':').next().unwrap().trim()).collect();
    if names != ["lo"] {
        println!("interfaces: {:?}", names);
        return;
    }
    let to: SocketAddr = "10.255.255.1:80".parse().unwrap();
    match TcpStream::connect_timeout(&to, Duration::from_secs(1)) {
        Ok(_) => println!("connected"),
        Err(_) => println!("contained"),
    }
}
''',
}

# A scan for the expected output: the environment; every process's command line,
# environment, open regular files and readable memory (/proc/<pid>/maps and mem);
# every file under /tmp, /dev/shm and the work dir. It prints what it found, or
# "nothing found" when the scan ended.
READ_EXPECTED = {
    "cpp": r'''
#include <dirent.h>
#include <algorithm>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
extern char** environ;
std::string rev = "TERCES", want(rev.rbegin(), rev.rend()), found;
long files = 0;
void look(const std::string& data, const std::string& where) {
    size_t at = data.find(want);
    if (at != std::string::npos) found += where + ": " + data.substr(at, 40) + "\n";
}
std::string slurp(const std::string& path, size_t cap = 1 << 22) {
    int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd < 0) return "";
    std::string out;
    char buf[65536];
    ssize_t n;
    while (out.size() < cap && (n = read(fd, buf, sizeof buf)) > 0) out.append(buf, n);
    close(fd);
    files++;
    return out;
}
void walk(const std::string& dir, int depth) {
    DIR* d = opendir(dir.c_str());
    if (!d || depth > 8) { if (d) closedir(d); return; }
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name, path = dir + "/" + name;
        struct stat st;
        if (name == "." || name == ".." || lstat(path.c_str(), &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) walk(path, depth + 1);
        else if (S_ISREG(st.st_mode)) look(slurp(path), path);
    }
    closedir(d);
}
void memory(const std::string& pid) {
    std::ifstream maps("/proc/" + pid + "/maps");
    int mem = open(("/proc/" + pid + "/mem").c_str(), O_RDONLY);
    if (mem < 0) return;
    std::string line;
    while (std::getline(maps, line)) {
        unsigned long lo, hi;
        char perms[5];
        if (sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3 || perms[0] != 'r') continue;
        std::string region;
        char buf[65536];
        for (unsigned long at = lo; at < hi && region.size() < (64u << 20); at += sizeof buf) {
            ssize_t n = pread(mem, buf, std::min<unsigned long>(sizeof buf, hi - at), at);
            if (n <= 0) break;
            region.append(buf, n);
        }
        look(region, "/proc/" + pid + "/mem");
    }
    close(mem);
}
int main() {
    for (char** e = environ; *e; e++) look(*e, "env");
    std::string self = std::to_string(getpid());
    DIR* proc = opendir("/proc");
    while (dirent* e = readdir(proc)) {
        std::string pid = e->d_name;
        if (pid.find_first_not_of("0123456789") != std::string::npos || pid == self) continue;
        for (const char* f : {"cmdline", "environ"}) look(slurp("/proc/" + pid + "/" + f), "/proc/" + pid + "/" + f);
        std::string fds = "/proc/" + pid + "/fd";
        if (DIR* d = opendir(fds.c_str())) {
            while (dirent* f = readdir(d)) {
                struct stat st;
                std::string path = fds + "/" + f->d_name;
                if (f->d_name[0] != '.' && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) look(slurp(path), path);
            }
            closedir(d);
        }
        memory(pid);
    }
    closedir(proc);
    for (const char* d : {"/tmp", "/dev/shm", "/work"}) walk(d, 0);
    std::cout << (found.empty() ? "nothing found in " + std::to_string(files) + " files" : "found " + found) << "\n";
}
''',
    "java": r'''
import java.io.*;
import java.nio.file.*;
import java.util.*;
public class Main {
    static String want = new StringBuilder("TERCES").reverse().toString();
    static StringBuilder found = new StringBuilder();
    static int files = 0;
    static void look(byte[] data, String where) {
        String s = new String(data, java.nio.charset.StandardCharsets.ISO_8859_1);
        int at = s.indexOf(want);
        if (at >= 0) found.append(where).append(": ").append(s, at, Math.min(s.length(), at + 40)).append("\n");
    }
    static byte[] slurp(Path p) {
        try (InputStream in = Files.newInputStream(p)) { files++; return in.readNBytes(1 << 22); }
        catch (Throwable e) { return new byte[0]; }
    }
    static void walk(Path dir, int depth) {
        if (depth > 8) return;
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
            for (Path p : ds) {
                if (Files.isSymbolicLink(p)) continue;
                if (Files.isDirectory(p)) walk(p, depth + 1);
                else if (Files.isRegularFile(p)) look(slurp(p), p.toString());
            }
        } catch (Throwable e) { }
    }
    static void memory(String pid) {
        try (RandomAccessFile mem = new RandomAccessFile("/proc/" + pid + "/mem", "r")) {
            for (String line : Files.readAllLines(Paths.get("/proc/" + pid + "/maps"))) {
                String[] f = line.split("\\s+");
                if (f[1].charAt(0) != 'r') continue;
                String[] range = f[0].split("-");
                long lo = Long.parseUnsignedLong(range[0], 16), hi = Long.parseUnsignedLong(range[1], 16);
                byte[] region = new byte[(int) Math.min(hi - lo, 64 << 20)];
                try { mem.seek(lo); mem.readFully(region); look(region, "/proc/" + pid + "/mem"); } catch (Throwable e) { }
            }
        } catch (Throwable e) { }
    }
    public static void main(String[] args) throws Exception {
        for (Map.Entry<String, String> e : System.getenv().entrySet()) look((e.getKey() + "=" + e.getValue()).getBytes(), "env");
        String self = Long.toString(ProcessHandle.current().pid());
        try (DirectoryStream<Path> procs = Files.newDirectoryStream(Paths.get("/proc"))) {
            for (Path p : procs) {
                String pid = p.getFileName().toString();
                if (!pid.matches("\\d+") || pid.equals(self)) continue;
                look(slurp(p.resolve("cmdline")), p + "/cmdline");
                look(slurp(p.resolve("environ")), p + "/environ");
                try (DirectoryStream<Path> fds = Files.newDirectoryStream(p.resolve("fd"))) {
                    for (Path fd : fds) if (Files.isRegularFile(fd)) look(slurp(fd), fd.toString());
                } catch (Throwable e) { }
                memory(pid);
            }
        }
        for (String d : new String[] {"/tmp", "/dev/shm", "/work"}) walk(Paths.get(d), 0);
        System.out.println(found.length() == 0 ? "nothing found in " + files + " files" : "found " + found);
    }
}
''',
    "javascript": r'''
const fs = require('fs');
const want = 'TERCES'.split('').reverse().join('');
let found = '';
let files = 0;
const look = (data, where) => {
  const s = Buffer.isBuffer(data) ? data.toString('latin1') : String(data);
  const at = s.indexOf(want);
  if (at >= 0) found += where + ': ' + s.slice(at, at + 40) + '\n';
};
const slurp = (path) => {
  try {
    const fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    const buf = Buffer.alloc(1 << 22);
    let n = 0, got;
    try { while (n < buf.length && (got = fs.readSync(fd, buf, n, buf.length - n, null)) > 0) n += got; } catch (e) { }
    fs.closeSync(fd);
    files++;
    return buf.subarray(0, n);
  } catch (e) { return Buffer.alloc(0); }
};
const walk = (dir, depth) => {
  let names = [];
  try { names = fs.readdirSync(dir); } catch (e) { return; }
  for (const name of names) {
    const path = dir + '/' + name;
    let st;
    try { st = fs.lstatSync(path); } catch (e) { continue; }
    if (st.isDirectory() && depth < 8) walk(path, depth + 1);
    else if (st.isFile()) look(slurp(path), path);
  }
};
const memory = (pid) => {
  let fd;
  try { fd = fs.openSync(`/proc/${pid}/mem`, 'r'); } catch (e) { return; }
  let maps = '';
  try { maps = fs.readFileSync(`/proc/${pid}/maps`, 'utf8'); } catch (e) { }
  for (const line of maps.split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) r/.exec(line);
    if (!m) continue;
    const lo = parseInt(m[1], 16), hi = parseInt(m[2], 16);
    const buf = Buffer.alloc(Math.min(hi - lo, 64 << 20));
    try { const n = fs.readSync(fd, buf, 0, buf.length, lo); look(buf.subarray(0, n), `/proc/${pid}/mem`); } catch (e) { }
  }
  fs.closeSync(fd);
};
for (const [k, v] of Object.entries(process.env)) look(k + '=' + v, 'env');
for (const pid of fs.readdirSync('/proc')) {
  if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
  look(slurp(`/proc/${pid}/cmdline`), `/proc/${pid}/cmdline`);
  look(slurp(`/proc/${pid}/environ`), `/proc/${pid}/environ`);
  let fds = [];
  try { fds = fs.readdirSync(`/proc/${pid}/fd`); } catch (e) { }
  for (const fd of fds) {
    const path = `/proc/${pid}/fd/${fd}`;
    try { if (fs.statSync(path).isFile()) look(slurp(path), path); } catch (e) { }
  }
  memory(pid);
}
for (const d of ['/tmp', '/dev/shm', '/work']) walk(d, 0);
console.log(found ? 'found ' + found : `nothing found in ${files} files`);
''',
    "go": r'''
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

var want = reverse("TERCES")

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}
var found strings.Builder
var files = 0

func look(data []byte, where string) {
	s := string(data)
	if at := strings.Index(s, want); at >= 0 {
		end := at + 40
		if end > len(s) {
			end = len(s)
		}
		found.WriteString(where + ": " + s[at:end] + "\n")
	}
}

func slurp(path string) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	files++
	data, _ := io.ReadAll(io.LimitReader(f, 1<<22))
	return data
}

func walk(dir string, depth int) {
	entries, err := os.ReadDir(dir)
	if err != nil || depth > 8 {
		return
	}
	for _, e := range entries {
		path := dir + "/" + e.Name()
		if e.Type().IsDir() {
			walk(path, depth+1)
		} else if e.Type().IsRegular() {
			look(slurp(path), path)
		}
	}
}

func memory(pid string) {
	mem, err := os.Open("/proc/" + pid + "/mem")
	if err != nil {
		return
	}
	defer mem.Close()
	maps, err := os.Open("/proc/" + pid + "/maps")
	if err != nil {
		return
	}
	defer maps.Close()
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' {
			continue
		}
		r := strings.SplitN(f[0], "-", 2)
		lo, _ := strconv.ParseUint(r[0], 16, 64)
		hi, _ := strconv.ParseUint(r[1], 16, 64)
		size := hi - lo
		if size > 64<<20 {
			size = 64 << 20
		}
		buf := make([]byte, size)
		n, _ := mem.ReadAt(buf, int64(lo))
		look(buf[:n], "/proc/"+pid+"/mem")
	}
}

func main() {
	for _, e := range os.Environ() {
		look([]byte(e), "env")
	}
	self := strconv.Itoa(os.Getpid())
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid := p.Name()
		if _, err := strconv.Atoi(pid); err != nil || pid == self {
			continue
		}
		look(slurp("/proc/"+pid+"/cmdline"), "/proc/"+pid+"/cmdline")
		look(slurp("/proc/"+pid+"/environ"), "/proc/"+pid+"/environ")
		fds, _ := os.ReadDir("/proc/" + pid + "/fd")
		for _, fd := range fds {
			path := "/proc/" + pid + "/fd/" + fd.Name()
			if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
				look(slurp(path), path)
			}
		}
		memory(pid)
	}
	for _, d := range []string{"/tmp", "/dev/shm", "/work"} {
		walk(d, 0)
	}
	if found.Len() == 0 {
		fmt.Printf("nothing found in %d files\n", files)
	} else {
		fmt.Println("found " + found.String())
	}
}
''',
    "rust": r'''
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;

struct Scan { want: String, found: String, files: usize }

impl Scan {
    fn look(&mut self, data: &[u8], where_: &str) {
        let w = self.want.as_bytes();
        if let Some(at) = data.windows(w.len()).position(|x| x == w) {
            let end = (at + 40).min(data.len());
            self.found += &format!("{}: {}\n", where_, String::from_utf8_lossy(&data[at..end]));
        }
    }
    fn slurp(&mut self, path: &str) -> Vec<u8> {
        let mut out = Vec::new();
        if let Ok(f) = fs::OpenOptions::new().read(true).custom_flags(0o4000).open(path) {
            self.files += 1;
            let _ = f.take(1 << 22).read_to_end(&mut out);
        }
        out
    }
    fn walk(&mut self, dir: &str, depth: usize) {
        let Ok(entries) = fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let path = e.path().to_string_lossy().into_owned();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() && depth < 8 { self.walk(&path, depth + 1); }
            else if t.is_file() { let d = self.slurp(&path); self.look(&d, &path); }
        }
    }
    fn memory(&mut self, pid: &str) {
        let Ok(mut mem) = File::open(format!("/proc/{}/mem", pid)) else { return };
        let maps = fs::read_to_string(format!("/proc/{}/maps", pid)).unwrap_or_default();
        for line in maps.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 2 || !f[1].starts_with('r') { continue; }
            let r: Vec<&str> = f[0].split('-').collect();
            let lo = u64::from_str_radix(r[0], 16).unwrap_or(0);
            let hi = u64::from_str_radix(r[1], 16).unwrap_or(0);
            let mut buf = vec![0u8; (hi - lo).min(64 << 20) as usize];
            if mem.seek(SeekFrom::Start(lo)).is_ok() {
                if let Ok(n) = mem.read(&mut buf) { let w = format!("/proc/{}/mem", pid); self.look(&buf[..n], &w); }
            }
        }
    }
}

fn main() {
    let mut s = Scan { want: "TERCES".chars().rev().collect(), found: String::new(), files: 0 };
    for (k, v) in std::env::vars_os() {
        let e = format!("{}={}", k.to_string_lossy(), v.to_string_lossy());
        s.look(e.as_bytes(), "env");
    }
    let me = std::process::id().to_string();
    for p in fs::read_dir("/proc").unwrap().flatten() {
        let pid = p.file_name().to_string_lossy().into_owned();
        if pid.parse::<u32>().is_err() || pid == me { continue; }
        for f in ["cmdline", "environ"] {
            let path = format!("/proc/{}/{}", pid, f);
            let d = s.slurp(&path);
            s.look(&d, &path);
        }
        if let Ok(fds) = fs::read_dir(format!("/proc/{}/fd", pid)) {
            for fd in fds.flatten() {
                let path = fd.path().to_string_lossy().into_owned();
                if fs::metadata(&path).map(|m| m.is_file()).unwrap_or(false) {
                    let d = s.slurp(&path);
                    s.look(&d, &path);
                }
            }
        }
        s.memory(&pid);
    }
    for d in ["/tmp", "/dev/shm", "/work"] { s.walk(d, 0); }
    if s.found.is_empty() { println!("nothing found in {} files", s.files); } else { println!("found {}", s.found); }
}
''',
}
for _lang in READ_EXPECTED:
    READ_EXPECTED[_lang] = READ_EXPECTED[_lang].replace("TERCES", SECRET[::-1])

# A daemon's double fork: its own session, its standard streams on /dev/null.
SLEEPER_CPP = (
    "#include <fcntl.h>\n#include <unistd.h>\n#include <iostream>\nint main() {\n  long long a, b;\n  std::cin >> a >> b;\n"
    "  if (fork() == 0) {\n    setsid();\n    if (fork() == 0) {\n"
    "      int null = open(\"/dev/null\", O_RDWR);\n      KEEP"
    f"      execl(\"/bin/sh\", \"sh\", \"-c\", \"while :; do sleep 1; done\", \"{SLEEPER}\", (char*)0);\n"
    "    }\n    _exit(0);\n  }\n  std::cout << a + b << '\\n';\n}")
# The same sleeper keeping the program's stdout: the case's output never ends.
SLEEPER_HOLDING_STDOUT_CPP = SLEEPER_CPP.replace("KEEP", "dup2(null, 0);\n")
SLEEPER_CPP = SLEEPER_CPP.replace("KEEP", "dup2(null, 0);\n      dup2(null, 1);\n      dup2(null, 2);\n")

# C++'s compiler bombs: each is the code's compile error within the compile deadline.
TEMPLATE_BOMB = """
template <int D, long long I> struct T { static constexpr long long v = T<D - 1, 2 * I>::v + T<D - 1, 2 * I + 1>::v; };
template <long long I> struct T<0, I> { static constexpr long long v = I & 1; };
int main() { return T<40, 0>::v != 0; }
"""
CONSTEXPR_LOOP = """
constexpr long long spin() {
    long long s = 0;
    for (int i = 0; i < 200000; i++)
        for (int j = 0; j < 200000; j++) s += i ^ j;
    return s;
}
constexpr long long x = spin();
int main() { return x == 0; }
"""
HUGE_ARRAY = ("#include <iostream>\nstatic char big[1ULL << 40];\n"
              "int main() { long long a, b; std::cin >> a >> b; big[a] = 1; std::cout << a + b + big[0] << '\\n'; }")
INCLUDE = ('#include "{path}"\n#include <iostream>\n'
           'int main() {{ long long a, b; std::cin >> a >> b; std::cout << a + b << "\\n"; }}')


def _attacks() -> dict[str, Attack]:
    found: dict[str, Attack] = {}
    one = {"inputs": ["1 2\n"], "outputs": ["3\n"]}
    for lang in LANGUAGES:
        # The baselines' verdicts are what is judged, not their speed: a first case in a new
        # container under gVisor, four at once on a loaded 2-core host, took over the default 3 s.
        baseline = label(lang, case_timeout_s=15)
        found[f"honest-right-{lang}"] = Attack(fenced(lang, honest(lang)), baseline, ROOMY_COMPILE)
        found[f"honest-wrong-{lang}"] = Attack(fenced(lang, honest(lang, "a - b + 1")), baseline, ROOMY_COMPILE)
        quick = label(lang, case_timeout_s=LOOP_CASE_S)
        found[f"{lang}:fork-bomb"] = Attack(fenced(lang, FORK_BOMB[lang]), quick, QUICK_COMPILE)
        found[f"{lang}:memory-bomb"] = Attack(fenced(lang, MEMORY_BOMB[lang]), label(lang, case_timeout_s=20),
                                              Limits(timeout_s=60, memory_mb=256, compile_timeout_s=COMPILE_S))
        # One case with room to reach the cap: a JVM's or Node's 16 MiB under gVisor, or on
        # a loaded 2-core host, took over the 1 s a case of the loops.
        found[f"{lang}:stdout-flood"] = Attack(fenced(lang, OUTPUT_FLOOD[lang]),
                                               label(lang, one, case_timeout_s=FLOOD_CASE_S),
                                               Limits(timeout_s=FLOOD_CASE_S + 5, compile_timeout_s=COMPILE_S))
        found[f"{lang}:stderr-flood"] = Attack(fenced(lang, STDERR_FLOOD[lang]), quick, QUICK_COMPILE)
        found[f"{lang}:infinite-loop"] = Attack(fenced(lang, INFINITE_LOOP[lang]), quick, QUICK_COMPILE)
        found[f"{lang}:network"] = Attack(fenced(lang, NETWORK[lang]),
                                          label(lang, {"inputs": [""], "outputs": ["contained\n"]}, case_timeout_s=10),
                                          ROOMY_COMPILE)
        found[f"{lang}:read-expected"] = Attack(
            fenced(lang, READ_EXPECTED[lang]),
            label(lang, {"inputs": ["1 2\n"], "outputs": [SECRET + "\n"]}, case_timeout_s=30), ROOMY_COMPILE)
        sleeper = SLEEPER_CPP if lang == "cpp" else honest(lang, harm=_detach(lang))
        found[f"{lang}:double-forked-sleeper"] = Attack(fenced(lang, sleeper), label(lang, case_timeout_s=SLEEPER_CASE_S),
                                                        ROOMY_COMPILE)
    found["cpp:sleeper-holding-stdout"] = Attack(fenced("cpp", SLEEPER_HOLDING_STDOUT_CPP),
                                                 label("cpp", case_timeout_s=LOOP_CASE_S), QUICK_COMPILE)
    cpp = label("cpp", one)
    for key, code in {"template-recursion": TEMPLATE_BOMB, "constexpr-loop": CONSTEXPR_LOOP,
                      "static-array-of-1tb": HUGE_ARRAY,
                      **{f"include-{p.strip('/').replace('/', '-')}": INCLUDE.format(path=p)
                         for p in ("/dev/zero", "/dev/random", "/proc/self/fd/0")}}.items():
        found[f"cpp:{key}"] = Attack(fenced("cpp", code), cpp, Limits(timeout_s=10))
    found["rust:include-bytes-dev-zero"] = Attack(fenced("rust", (
        'static ZERO: &[u8] = include_bytes!("/dev/zero");\nfn main() { println!("{}", ZERO.len()); }')),
        label("rust", one), Limits(timeout_s=10))
    return found


def _detach(lang: str) -> str:
    """A statement that starts the sleeper detached (a shell backgrounds a
    setsid'd shell and exits: a double fork), before the program answers."""
    cmd = DETACH.replace("'", "\\'") if lang == "javascript" else DETACH
    return {
        "java": f'new ProcessBuilder("sh", "-c", "{cmd}").start().waitFor();\n    ',
        "javascript": f"require('child_process').execSync('{cmd}');\n",
        "go": f'exec.Command("sh", "-c", "{cmd}").Run()\n\t',
        "rust": f'std::process::Command::new("sh").arg("-c").arg("{cmd}").status().unwrap();\n    ',
    }[lang]


ATTACKS = _attacks()

# Per attack, the verdicts each language's version may get, and why where they differ.
MEMORY_VERDICTS = {
    # The JVM's heap (75% of the limit, the table's MaxRAMPercentage) is full before the
    # cgroup's limit: OutOfMemoryError ends the program with status 1, a failed case.
    # Under gVisor its own memory counts against the container's limit too, which the
    # kernel's OOM killer may then meet first.
    "java": {Verdict.FAILED, Verdict.OUT_OF_MEMORY} if GVISOR else {Verdict.FAILED},
}
DEFAULT_MEMORY_VERDICTS = {Verdict.OUT_OF_MEMORY}  # the kernel's OOM killer, seen by the judge first
# Each compile-time bomb is the code's compile error; the fragments are what stops
# it: the compiler's own limit or allocation failure, or the step's memory limit or deadline.
COMPILE_BOMBS = {
    # 2^40 instantiations: cc1plus runs out of address space (or of the cgroup's memory) first.
    # g++ says "virtual memory exhausted" when its collected heap cannot grow, "out of memory
    # allocating" when a malloc fails: which comes first depends on the container's memory then.
    "cpp:template-recursion": ("virtual memory exhausted", "out of memory allocating",
                               "the compiler ran out of memory", "the compiler ran past its deadline"),
    # 4e10 steps: g++ stops at its constexpr operation limit within seconds.
    "cpp:constexpr-loop": ("evaluation operation count exceeds limit", "the compiler ran past its deadline"),
    # 1 TB of .bss is past the small code model's 2 GB: the linker refuses it.
    "cpp:static-array-of-1tb": ("relocation truncated to fit",),
    # An endless header: cc1plus asks for 512 MB to read it and is refused.
    "cpp:include-dev-zero": ("out of memory allocating", "the compiler ran out of memory"),
    "cpp:include-dev-random": ("out of memory allocating", "the compiler ran out of memory"),
    # rustc reads /dev/zero until the cgroup's OOM killer stops it.
    "rust:include-bytes-dev-zero": ("the compiler ran out of memory", "memory allocation of",
                                    "the compiler ran past its deadline"),
}


def key(lang: str, attack: str) -> str:
    return f"{lang}:{attack}"


def compile_deadline(case: str) -> float:
    """The compile step's deadline of an attack: its limits' (COMPILE_S), else its language's own."""
    limits = ATTACKS[case].limits
    if "compile_timeout_s" in limits.model_fields_set:
        return limits.compile_timeout_s
    return language(case.split(":")[0]).compile_timeout_s


def params(attack: str) -> list[str]:
    return [key(lang, attack) for lang in LANGUAGES]


def _lost(batch, case: str) -> None:
    """The attack scored nothing and no more than the honest wrong answer, whose
    baseline (and the honest right one's) is checked with it."""
    lang = case.split(":")[0]
    right, wrong, grade = batch[f"honest-right-{lang}"], batch[f"honest-wrong-{lang}"], batch[case]
    assert (right.verdict, right.reward) == (Verdict.PASSED, 1.0), show(right)
    assert (wrong.verdict, wrong.passed) == (Verdict.FAILED, 0), show(wrong)
    assert grade.passed == 0 and grade.reward <= wrong.reward, show(grade)


@pytest.mark.parametrize("case", params("fork-bomb"))
def test_fork_bomb(batch, case):
    grade = batch[case]
    # The pids limit makes fork fail and the spinning parent meets the case deadline
    # (seen: timeout in every language), or memory or the host's deadline ends it.
    assert grade.verdict in FORK_BOMB_VERDICTS, show(grade)
    _lost(batch, case)
    limits = ATTACKS[case].limits
    assert grade.duration_s < limits.timeout_s + compile_deadline(case) + limits.startup_grace_s + ENGINE_WAIT_S


@pytest.mark.parametrize("case", params("memory-bomb"))
def test_memory_bomb(batch, case):
    lang = case.split(":")[0]
    grade = batch[case]
    assert grade.verdict in MEMORY_VERDICTS.get(lang, DEFAULT_MEMORY_VERDICTS), show(grade)
    _lost(batch, case)
    if grade.verdict is Verdict.FAILED:
        assert "java.lang.OutOfMemoryError: Java heap space" in messages(grade), show(grade)


@pytest.mark.parametrize("case", params("stdout-flood"))
def test_stdout_flood_fails_its_case_at_the_cap(batch, case):
    """The 16 MiB cap of a case's output fails the case, before its deadline."""
    grade = batch[case]
    if _gvisor_sandbox_exited(grade):
        _lost(batch, case)
        return
    assert grade.verdict is Verdict.FAILED, show(grade)
    assert "the program wrote more than 16777216 bytes" in messages(grade), show(grade)
    _lost(batch, case)
    assert grade.duration_s < compile_deadline(case) + FLOOD_CASE_S, show(grade)


def _gvisor_sandbox_exited(grade) -> bool:
    """Whether gVisor's sandbox exited (code 2) under the run, so the harness did not report:
    KILLED. Seen once as a looping node was killed at its case deadline, and once as Rust's stdout
    flood met the cap (stop 36's gVisor pass, 0.6 s in). Traced in stop 37: the sentry panics when
    the host refuses it a thread, which a fork bomb's leftovers in the same pooled container
    caused; the pool now makes such a run once more elsewhere and the bombs run last, so this
    should no longer be seen. The host is still checked (`_lost`)."""
    return (GVISOR and grade.verdict is Verdict.KILLED
            and grade.message == "the harness did not report (container exit code 2)")


@pytest.mark.parametrize("case", params("stderr-flood"))
def test_stderr_flood_runs_to_the_case_deadline(batch, case):
    """A program's stderr past the head the failure message keeps is drained,
    not capped: a flood on it is stopped by the case's deadline."""
    grade = batch[case]
    assert grade.verdict is Verdict.TIMEOUT, show(grade)
    assert "CaseTimeout" in messages(grade), show(grade)
    _lost(batch, case)


@pytest.mark.parametrize("case", [*params("infinite-loop"), "cpp:sleeper-holding-stdout"])
def test_endless_program_times_out(batch, case):
    # A sleeper that keeps the program's stdout open keeps its case's output from ending.
    grade = batch[case]
    if case == "javascript:infinite-loop" and _gvisor_sandbox_exited(grade):
        _lost(batch, case)
        return
    assert grade.verdict is Verdict.TIMEOUT, show(grade)
    assert "CaseTimeout" in messages(grade) or grade.message == "deadline exceeded", show(grade)
    _lost(batch, case)


@pytest.mark.parametrize("case", params("network"))
def test_network_is_unreachable(batch, case):
    grade = batch[case]
    # PASSED: the program saw only lo, and its connect failed.
    assert (grade.verdict, grade.passed) == (Verdict.PASSED, 1), show(grade)


@pytest.mark.parametrize("case", params("read-expected"))
def test_expected_output_is_nowhere_to_read(batch, case):
    grade = batch[case]
    assert grade.verdict is Verdict.FAILED and grade.passed == 0, show(grade)
    said = messages(grade)
    assert "nothing found in" in said, show(grade)
    # It looked: at least the other processes' command lines and its own work dir.
    assert int(re.search(r"nothing found in (\d+) files", said).group(1)) >= 3, show(grade)


@pytest.mark.parametrize("case", params("double-forked-sleeper"))
def test_double_forked_sleeper_is_gone(batch, case):
    grade = batch[case]
    assert (grade.verdict, grade.reward) == (Verdict.PASSED, 1.0), show(grade)
    if not GVISOR:  # gVisor's processes are not the host's: the next test looks from inside
        assert _host_sleepers() == [], "the sleeper outlived its run"


def _host_sleepers(wait_s: float = 5.0) -> list[str]:
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and SLEEPER.encode() in (proc / "cmdline").read_bytes():
                    found.append(proc.name)
            except OSError:
                continue
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_next_run_in_the_same_container_sees_no_sleeper(lang, leftovers):
    """One container (a pool of one, in the session's mode and runtime): the
    sleeper's run, then a run that counts the sleeper's processes from inside."""
    runtime = os.environ.get("REWARDBOX_TEST_RUNTIME") or None
    mode = os.environ.get("REWARDBOX_TEST_MODE") or DEFAULT_MODE
    box = make_sandbox(mode, max_containers=1, retry_s=20, runtime=runtime)
    try:
        reward = CodeReward(box, limits=ROOMY_COMPILE)
        first = reward.submit_grade(Sample(completion=ATTACKS[key(lang, "double-forked-sleeper")].completion,
                                           label=label(lang, case_timeout_s=SLEEPER_CASE_S))).result()
        assert (first.verdict, first.reward) == (Verdict.PASSED, 1.0), show(first)
        count = reward.submit_grade(Sample(completion=fenced(lang, shell(lang, LIST_SLEEPERS)),
                                           label=label(lang, {"inputs": [""], "outputs": ["0\n"]},
                                                       case_timeout_s=SLEEPER_CASE_S))).result()
        assert (count.verdict, count.passed) == (Verdict.PASSED, 1), show(count)
    finally:
        box.close()
    assert leftovers() == {"containers": [], "processes": []}


# A sleeper started in the same run, its name built by the shell (the command line
# that starts it holds only "$n-<token>"), then the count: 1.
VISIBLE_SLEEPER = (f"n=leftover; setsid sh -c 'while :; do sleep 1; done' $n-{TOKEN} </dev/null >/dev/null 2>&1 & "
                   f"sleep 1; {LIST_SLEEPERS}")


def test_the_sleeper_count_can_see_a_sleeper(leftovers):
    """The count above finds a sleeper that is alive: one started in the same run."""
    box = make_sandbox(os.environ.get("REWARDBOX_TEST_MODE") or DEFAULT_MODE, max_containers=1, retry_s=20,
                       runtime=os.environ.get("REWARDBOX_TEST_RUNTIME") or None)
    try:
        grade = CodeReward(box, limits=ROOMY_COMPILE).grade(
            fenced("cpp", shell("cpp", VISIBLE_SLEEPER)),
            label("cpp", {"inputs": [""], "outputs": ["1\n"]}, case_timeout_s=SLEEPER_CASE_S))
        assert (grade.verdict, grade.passed) == (Verdict.PASSED, 1), show(grade)
    finally:
        box.close()


@pytest.mark.parametrize("case", list(COMPILE_BOMBS))
def test_compile_time_bomb_is_a_compile_error(batch, case):
    grade = batch[case]
    if GVISOR and case == "rust:include-bytes-dev-zero" and grade.verdict is Verdict.OUT_OF_MEMORY:
        # Under gVisor the OOM kill of rustc can take the harness's report with it:
        # the run's out_of_memory, the same penalty.
        assert grade.reward == -1.0 and grade.message == "memory limit exceeded", show(grade)
        return
    assert grade.verdict is Verdict.COMPILE_ERROR and grade.reward == -1.0, show(grade)
    assert any(fragment in grade.message for fragment in COMPILE_BOMBS[case]), show(grade)
    # Within the compile deadline, whatever stopped it.
    assert grade.duration_s < compile_deadline(case) + ATTACKS[case].limits.timeout_s + ENGINE_WAIT_S, show(grade)


@pytest.mark.parametrize("case", ["cpp:include-proc-self-fd-0"])
def test_including_the_compilers_stdin_reads_nothing(batch, case):
    """The compiler's stdin is empty: the header is empty and the right answer passes, nothing hangs."""
    grade = batch[case]
    assert (grade.verdict, grade.reward) == (Verdict.PASSED, 1.0), show(grade)
