//! Oracle: our ssh_config resolution against OpenSSH's own, `ssh -G -F FILE DEST`.
//!
//! Every case is a generated config file plus a destination (and sometimes `-o`/`-p`/`-i`/
//! `-J` options); `ssh -G` prints what OpenSSH resolved without connecting. Fields are
//! compared one by one; a case where OpenSSH refuses the config must make our resolver
//! refuse it too. `IdentityFile` values are printed unexpanded by `ssh -G`, so each one is
//! expanded by OpenSSH itself in a second run (`-o IdentityAgent=<value>`, which takes the
//! same `~`, `${VAR}` and `%` tokens).
//!
//! Excluded on purpose (docs/REMOTE.md): DNS canonicalisation with `CanonicalDomains` (needs
//! a resolver we do not control in CI) and `-o` options after the destination (clap does not
//! keep their position).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use reasonix_bootstrap::{Destination, ResolvedHost, SshOptions};

/// One oracle case.
#[derive(Clone, Debug)]
struct Case {
    name: String,
    /// Config text; `{DIR}` is replaced by the case's temp dir.
    config: String,
    /// Destination as given to ssh.
    dest: String,
    /// `-o` options, in order.
    opts: Vec<String>,
    /// `-p PORT`.
    port: Option<u16>,
    /// `-J JUMP`.
    jump: Option<String>,
    /// `-i FILE` (relative to the temp dir; created so ssh does not skip it).
    identity: Option<String>,
    /// Extra files in the temp dir (for Include).
    files: Vec<(String, String)>,
    /// No `-F`: read `~/.ssh/config` and the real `/etc/ssh/ssh_config` as ssh does.
    system: bool,
}

fn case(name: &str, config: &str, dest: &str) -> Case {
    Case {
        name: name.to_string(),
        config: config.to_string(),
        dest: dest.to_string(),
        opts: Vec::new(),
        port: None,
        jump: None,
        identity: None,
        files: Vec::new(),
        system: false,
    }
}

impl Case {
    fn o(mut self, opt: &str) -> Self {
        self.opts.push(opt.to_string());
        self
    }
    fn file(mut self, name: &str, text: &str) -> Self {
        self.files.push((name.to_string(), text.to_string()));
        self
    }
}

/// Generated cases: templates crossed with several destinations.
fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    let multi = "# leading comment\n\
        Host dev* !dev-bad\n  HostName %h.Internal.Example # trailing comment\n  User alice\n  Port 2200\n  IdentityFile ~/.ssh/dev_%r_%h\n\
        Host *.internal.example\n  User late\n  IdentitiesOnly yes\n\
        Host dev1 prod\n  User bob\n  IdentityFile %d/second_%u_%n\n  ServerAliveInterval 15\n\
        Host *\n  Port 22\n  StrictHostKeyChecking accept-new\n  ServerAliveInterval 99\n";
    for d in [
        "dev1",
        "dev-bad",
        "prod",
        "other",
        "DEV1",
        "carol@dev2",
        "a@b@dev3",
    ] {
        v.push(case(&format!("multi-block {d}"), multi, d));
    }
    let patterns = "Host ?ox\n Port 1001\nHost *.example.com !bad.example.com\n Port 1002\n\
        Host a,b\n Port 1003\nHost !neg\n Port 1004\nHost x y z\n Port 1005\nHost *\n Port 1006\n";
    for d in [
        "box",
        "fox",
        "boxx",
        "a.example.com",
        "bad.example.com",
        "a,b",
        "a",
        "neg",
        "y",
        "BOX",
    ] {
        v.push(case(&format!("host patterns {d}"), patterns, d));
    }
    let matches = "Host short\n HostName Long.Example.COM\n\
        Match host *.example.com user deploy\n Port 2022\n\
        Match host *.EXAMPLE.com !user deploy\n Port 2023\n\
        Match originalhost short\n ConnectTimeout 7\n\
        Match !originalhost short\n ConnectTimeout 1m30s\n\
        Match user Deploy\n BatchMode yes\n";
    for d in [
        "deploy@short",
        "other@short",
        "Deploy@short",
        "deploy@x.example.com",
        "plain",
    ] {
        v.push(case(&format!("match host/user {d}"), matches, d));
    }
    let finalp = "Host x\n HostName ABC.%h.Def\n\
        Match final host abc.x.def\n Port 4444\n\
        Host abc.x.def\n User finaluser\n\
        Match !final\n ServerAliveCountMax 9\n\
        Match canonical\n NumberOfPasswordPrompts 5\n";
    for d in ["x", "y"] {
        v.push(case(&format!("match final {d}"), finalp, d));
    }
    let canon = "CanonicalizeHostname yes\nMatch canonical host web\n Port 3001\n\
        Match !canonical\n User notcanon\nHost web\n HashKnownHosts yes\n";
    for d in ["web", "db"] {
        v.push(case(&format!("canonicalize {d}"), canon, d));
    }
    let exec = "Match exec true\n User exec_true\nMatch exec false\n Port 1\n\
        Match exec \"test %h = target\"\n Port 2\nMatch !exec \"test %n = target\"\n IdentitiesOnly yes\n\
        Match host nomatch exec \"exit 1\"\n Port 3\n";
    for d in ["target", "other"] {
        v.push(case(&format!("match exec {d}"), exec, d));
    }
    let all = "Match all\n User everyone\nMatch canonical all\n Port 5\nMatch final all\n Port 6\n";
    v.push(case("match all", all, "h"));
    let localuser = "Match localuser root\n User was_root\nMatch !localuser root\n User not_root\n";
    v.push(case("match localuser", localuser, "h"));
    let tokens = "Host tok\n HostName Tok.Example\n User tu\n Port 2345\n\
        UserKnownHostsFile ~/kh_%h_%p_%r_%n_%u_%d %d/kh2_%C_%i_%L_%l_%k_%%\n\
        IdentityAgent /tmp/agent_%h_%r_%C\n\
        IdentityFile ~/.ssh/id_%h_%p_%r_%n_%C_%i_%L_%l_%k_%u_%%\n";
    for d in ["tok", "someone@tok"] {
        v.push(case(&format!("tokens {d}"), tokens, d));
    }
    let env =
        "Host *\n IdentityFile ${RXT_DIR}/key_${RXT_USER}\n UserKnownHostsFile ${RXT_DIR}/kh\n\
        IdentityAgent ${RXT_DIR}/agent.sock\n";
    v.push(case("env vars", env, "h"));
    v.push(case(
        "env var unset",
        "Host *\n UserKnownHostsFile ${RXT_UNSET_VAR}/kh\n",
        "h",
    ));
    v.push(case(
        "env var unset in identity",
        "Host *\n IdentityFile ${RXT_UNSET_VAR}/k\n",
        "h",
    ));
    v.push(case(
        "unknown token",
        "Host *\n UserKnownHostsFile ~/kh_%z\n",
        "h",
    ));
    v.push(case(
        "unknown token in HostName",
        "Host *\n HostName %p.example\n",
        "h",
    ));
    v.push(case(
        "HostName %% and %h",
        "Host *\n HostName 100%%-%h\n",
        "h",
    ));
    let quoting = "Host q\n IdentityFile \"~/with space/key\"\n User 'quoted'\n\
        UserKnownHostsFile \"/k 1\" /k2\n HOSTNAME=Quoted.Example\n port = 2022\n\
        ServerAliveInterval=10m\n PreferredAuthentications password,publickey\n";
    v.push(case("quoting and case", quoting, "q"));
    v.push(case("unterminated quote", "Host *\n User \"open\n", "h"));
    v.push(case("extra args", "Host *\n User a b\n", "h"));
    v.push(case("unknown keyword", "Host *\n NoSuchOption yes\n", "h"));
    v.push(case(
        "ignore unknown",
        "IgnoreUnknown NoSuch*,other\nHost *\n NoSuchOption yes\n User ign\n",
        "h",
    ));
    v.push(case("bad match criterion", "Match bogus x\n User x\n", "h"));
    v.push(case("match without criteria", "Match\n User x\n", "h"));
    v.push(case("bad port", "Host *\n Port 0\n", "h"));
    v.push(case("port service name", "Host *\n Port ssh\n", "h"));
    v.push(case("bad flag", "Host *\n IdentitiesOnly maybe\n", "h"));
    v.push(case("bad time", "Host *\n ConnectTimeout 5x\n", "h"));
    v.push(case(
        "identityfile none",
        "Host a\n IdentityFile none\nHost *\n IdentitiesOnly yes\n",
        "a",
    ));
    v.push(case(
        "forward agent per host",
        "Host fwd\n ForwardAgent yes\nHost path\n ForwardAgent ~/agent.sock\nHost *\n ForwardAgent no\n",
        "fwd",
    ));
    v.push(case(
        "forward agent path",
        "Host path\n ForwardAgent ~/agent.sock\nHost *\n ForwardAgent no\n",
        "path",
    ));
    v.push(case(
        "forward agent off by default",
        "Host other\n ForwardAgent yes\n",
        "h",
    ));
    v.push(case(
        "known hosts none",
        "Host *\n UserKnownHostsFile none\n GlobalKnownHostsFile none\n",
        "h",
    ));
    v.push(case(
        "strict variants",
        "Host a\n StrictHostKeyChecking off\nHost b\n StrictHostKeyChecking YES\nHost c\n StrictHostKeyChecking no\n",
        "b",
    ));
    v.push(case(
        "pubkey unbound",
        "Host *\n PubkeyAuthentication unbound\n PasswordAuthentication no\n KbdInteractiveAuthentication no\n",
        "h",
    ));
    let jumps = "Host j1\n ProxyJump u@hop1:2201,hop2\nHost j2\n ProxyJump ssh://u@hop:23\n\
        Host j3\n ProxyJump none\n ProxyCommand nc %h %p\nHost j4\n ProxyCommand nc %h %p\n ProxyJump hop\n\
        Host j5\n ProxyJump [::1]:2222\n";
    for d in ["j1", "j2", "j3", "j4", "j5"] {
        v.push(case(&format!("proxy {d}"), jumps, d));
    }
    let first_wins = "Host fw\n User first\n User second\n Port 1111\nHost fw\n Port 2222\n\
        IdentityFile /one\nHost *\n IdentityFile /two\n";
    v.push(case("first value wins", first_wins, "fw"));
    v.push(
        case("cli -o beats file", first_wins, "fw")
            .o("User=cli")
            .o("User=cli2")
            .o("Port 3333"),
    );
    v.push(case("cli -o user beats dest user", first_wins, "dest@fw").o("User=cli"));
    v.push(case("dest user beats file", first_wins, "dest@fw"));
    v.push(case("uri dest", first_wins, "ssh://uri@fw:4444"));
    v.push(case("uri dest with -o port", first_wins, "ssh://uri@fw:4444").o("Port=5555"));
    v.push(case("cli identity accumulates", first_wins, "fw").o("IdentityFile=/cli"));
    v.push(case("cli hostname", first_wins, "fw").o("HostName=CLI.Example"));
    v.push(
        case(
            "cli match user sees -o",
            "Match user cliuser\n Port 6000\n",
            "h",
        )
        .o("User=cliuser"),
    );
    let mut p = case("-p flag", first_wins, "fw");
    p.port = Some(7777);
    v.push(p);
    let mut j = case("-J flag", jumps, "j1");
    j.jump = Some("a@b:22,c".into());
    v.push(j);
    let mut i = case("-i flag", first_wins, "fw");
    i.identity = Some("cli_key".into());
    v.push(i);
    let include = "Include {DIR}/inc_*.conf\nHost inc\n User late\n\
        Host gated\n Include {DIR}/gated.conf\nHost *\n Include {DIR}/missing_*.conf\n";
    for d in ["inc", "gated", "other"] {
        v.push(
            case(&format!("include {d}"), include, d)
                .file(
                    "inc_a.conf",
                    "Host inc\n User fromglob\nMatch all\n Port 4444\n",
                )
                .file("inc_b.conf", "Host inc\n IdentitiesOnly yes\n")
                .file(
                    "gated.conf",
                    "ConnectTimeout 3\nHost other\n BatchMode yes\n",
                ),
        );
    }
    v.push(case(
        "addresses v4",
        "Host 127.0.0.1\n Port 1\n",
        "127.0.0.1",
    ));
    v.push(case(
        "address short form",
        "Match host 127.0.0.1\n Port 2\n",
        "127.1",
    ));
    v.push(case(
        "address v6",
        "Match host fe80::1\n Port 3\n",
        "FE80::1",
    ));
    v.push(case(
        "hostname to address",
        "Host a\n HostName 0x7f.1\nMatch final host 127.0.0.1\n Port 9\n",
        "a",
    ));
    v.push(case(
        "server alive none",
        "Host *\n ServerAliveInterval none\n ConnectTimeout none\n",
        "h",
    ));
    let alias = "Host *\n HostKeyAlias Alias.%h\n UserKnownHostsFile /tmp/kh_%k_%h\n";
    v.push(case("host key alias (no tokens in it)", alias, "h"));
    v.push(case(
        "host key alias and %k",
        "Host *\n HostKeyAlias Alias.X\n UserKnownHostsFile /tmp/kh_%k_%h\n",
        "h",
    ));
    v.push(case("cli host key alias", "", "h").o("HostKeyAlias=CLI.Alias"));
    v.push(
        case(
            "include in final pass",
            "Include {DIR}/f.conf\nHost h\n HostName H.Final\n",
            "h",
        )
        .file(
            "f.conf",
            "Match final host h.final\n Port 7\nHost h.final\n User fromfinal\n",
        ),
    );
    v.push(case(
        "match host sees expanded HostName",
        "Host a\n HostName %h.Example.ORG\nMatch host a.example.org\n User m\nMatch originalhost a.example.org\n Port 9\n",
        "a",
    ));
    v.push(case(
        "match user with @ in it",
        "Match user me@corp\n Port 8\n",
        "me@corp@h",
    ));
    for (n, ia) in [
        ("SSH_AUTH_SOCK", "SSH_AUTH_SOCK"),
        ("none", "none"),
        ("legacy $VAR", "$RXT_DIR"),
        ("tilde", "~/agent.%h"),
    ] {
        v.push(case(
            &format!("identity agent {n}"),
            &format!("Host *\n IdentityAgent {ia}\n"),
            "h",
        ));
    }
    for d in ["h", "me@Other.Host"] {
        let mut sys = case(&format!("system config files {d}"), "", d);
        sys.system = true;
        v.push(sys);
    }
    let mut i2 = case(
        "-i before file identities",
        "Host *\n IdentityFile /file_key\n",
        "h",
    )
    .o("IdentityFile=/opt_key");
    i2.identity = Some("cli_first".into());
    v.push(i2);
    // `-o IdentityFile` several times: order kept, repeats dropped, `none` names no file
    // and keeps the defaults away, as `ssh -G` prints them.
    let ids = "Host *\n IdentityFile /file_a\n IdentityFile /file_a\n IdentityFile ~/.ssh/id_%h\n";
    v.push(
        case("-o identity order", "", "h")
            .o("IdentityFile=/b")
            .o("IdentityFile=/a"),
    );
    v.push(
        case("-o identity repeated", "", "h")
            .o("IdentityFile=/a")
            .o("IdentityFile=/b")
            .o("IdentityFile=/a"),
    );
    v.push(case("-o identity none", "", "h").o("IdentityFile=none"));
    v.push(case("-o identity NONE", "", "h").o("IdentityFile=NONE"));
    v.push(
        case("-o identity none then a", "", "h")
            .o("IdentityFile=none")
            .o("IdentityFile=/a"),
    );
    v.push(
        case("-o identity a then none", "", "h")
            .o("IdentityFile=/a")
            .o("IdentityFile=none"),
    );
    v.push(case("file identities repeated", ids, "h"));
    v.push(
        case("-o and file identity repeated", ids, "h")
            .o("IdentityFile=/file_a")
            .o("IdentityFile=/c"),
    );
    v.push(
        case("-o identity with tokens repeated", ids, "h")
            .o("IdentityFile=~/.ssh/id_%h")
            .o("IdentityFile=~/.ssh/id_h"),
    );
    v.push(case(
        "file identity none first",
        "Host *\n IdentityFile none\n IdentityFile /f\n",
        "h",
    ));
    let mut i3 = case("-i and -o same file", "", "h");
    i3.identity = Some("same_key".into());
    i3.opts.push("IdentityFile=/other".into());
    v.push(i3);
    // Host and user names with shell metacharacters are refused (CVE-2023-51385); those
    // OpenSSH lets through stay usable.
    for d in [
        "a;b",
        "a$b",
        "a b",
        "h(",
        "a|b",
        "a\\b",
        "a{b",
        "a`b",
        "h,x",
        "-h",
        "h&x",
        "u;x@h",
        "u'@h",
        "u\"x@h",
        "u|x@h",
        "u(@h",
        "u@h\\",
        "u$x@h",
        "u,v@h",
        "ssh://u%3bx@h",
        "ssh://u%40v@h:2200",
        "ssh://u;fingerprint=x@h",
        "ssh://a@b@h:2200",
        "ssh://u@h;x:22",
    ] {
        v.push(case(&format!("destination {d}"), "", d));
    }
    v.push(case("cli user with metacharacter", "", "h").o("User=a;b"));
    v.push(case("cli user with metacharacter over dest", "", "ok@h").o("User=a|b"));
    v.push(case(
        "file user with metacharacter (not checked)",
        "Host *\n User a;b\n",
        "h",
    ));
    v.push(case(
        "times and counts",
        "Host *\n ConnectTimeout 1h\n ServerAliveInterval 2m\n ServerAliveCountMax 0\n NumberOfPasswordPrompts 1\n",
        "h",
    ));
    v.push(case("bad port 65536", "Host *\n Port 65536\n", "h"));
    v.push(case(
        "negative count",
        "Host *\n ServerAliveCountMax -1\n",
        "h",
    ));
    for d in ["a", "c", "z"] {
        v.push(case(
            &format!("strict {d}"),
            "Host a\n StrictHostKeyChecking accept-new\nHost c\n StrictHostKeyChecking ask\nHost *\n StrictHostKeyChecking false\n",
            d,
        ));
    }
    v.push(case(
        "address patterns",
        "Host 10.*\n Port 10\nHost *\n Port 11\n",
        "10.1.2.3",
    ));
    v.push(case(
        "match exec tokens",
        "Match exec \"test %p = 22 && test %r = %u && test %n = h && test %h = h.x && test %% = %%\"\n Port 12\n\
         Match exec \"test -n '%C%l%L%i%d%k'\"\n User tok\nHost *\n HostName h.x\n",
        "h",
    ));
    v.push(case(
        "canonicalize always",
        "CanonicalizeHostname always\nMatch canonical\n Port 13\n",
        "h",
    ));
    v.push(case(
        "canonicalize bad value",
        "CanonicalizeHostname maybe\n",
        "h",
    ));
    for (n, line) in [
        ("unused flag ok", "ForwardX11 yes"),
        ("unused flag bad", "ForwardX11 maybe"),
        ("unused flag extra", "TCPKeepAlive yes no"),
        ("unused choice ok", "RequestTTY force"),
        ("unused choice bad", "ControlMaster sometimes"),
        ("unused choice case", "AddressFamily INET6"),
        ("unused int bad", "ConnectionAttempts x"),
        ("unused int ok", "ConnectionAttempts 3"),
        ("unused time bad", "ForwardX11Timeout 3q"),
        ("compression bad", "Compression maybe"),
        (
            "unused in inactive block still checked",
            "Host nomatch\n ForwardX11 maybe",
        ),
    ] {
        v.push(case(n, &format!("{line}\nHost *\n User u\n"), "h"));
    }
    v.push(case(
        "blank and indented comments",
        "\n   # x\n\t\nHost *\n\t# y\n  User tabs\n",
        "h",
    ));
    v.push(case("keyword without value", "Host *\n User\n", "h"));
    v.push(case("host without pattern", "Host\n User x\n", "h"));
    v.push(case("cmdline Host refused", "", "h").o("Host=x"));
    v.push(case("cmdline unknown option", "", "h").o("Bogus=1"));
    v.push(
        case("cmdline IgnoreUnknown first", "", "h")
            .o("IgnoreUnknown=bogus")
            .o("Bogus=1"),
    );
    v.push(
        case("cmdline IgnoreUnknown after", "", "h")
            .o("Bogus=1")
            .o("IgnoreUnknown=bogus"),
    );
    v.push(case("cmdline IgnoreUnknown covers file", "Bogus 1\n", "h").o("IgnoreUnknown=bog*"));
    v
}

fn run_ssh(c: &Case, dir: &Path, pre: &[String]) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut cmd = Command::new("ssh");
    cmd.env("HOME", dir.join("home"));
    cmd.arg("-G");
    if !c.system {
        cmd.arg("-F").arg(dir.join("config"));
    }
    for o in pre {
        cmd.arg("-o").arg(o);
    }
    // Our CLI contract: -p, -i and -J count as given before every -o.
    if let Some(p) = c.port {
        cmd.arg("-p").arg(p.to_string());
    }
    if let Some(j) = &c.jump {
        cmd.arg("-J").arg(j);
    }
    if let Some(i) = &c.identity {
        cmd.arg("-i").arg(dir.join(i));
    }
    for o in &c.opts {
        cmd.arg("-o").arg(o);
    }
    cmd.arg(&c.dest);
    let out = cmd.output().unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let (k, v) = line.split_once(' ').unwrap_or((line, ""));
        map.entry(k.to_string()).or_default().push(v.to_string());
    }
    Ok(map)
}

fn ours(c: &Case, dir: &Path, home: &Path) -> Result<ResolvedHost, String> {
    let mut o = SshOptions {
        config_file: (!c.system).then(|| dir.join("config")),
        home: Some(home.to_path_buf()),
        port: c.port,
        jump: c.jump.clone(),
        ..Default::default()
    };
    if let Some(i) = &c.identity {
        o.identity_files.push(dir.join(i));
    }
    for opt in &c.opts {
        o.push_option(opt).map_err(|e| e.to_string())?;
    }
    // Our destination syntax wants IPv6 in brackets; ssh takes it bare.
    let dest = if c.dest.contains("::") && !c.dest.starts_with('[') {
        format!("[{}]", c.dest)
    } else {
        c.dest.clone()
    };
    let d = Destination::parse(&dest).map_err(|e| e.to_string())?;
    o.resolve(&d).map_err(|e| e.to_string())
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

fn one(m: &BTreeMap<String, Vec<String>>, k: &str) -> String {
    m.get(k)
        .and_then(|v| v.first())
        .cloned()
        .unwrap_or_default()
}

/// Hops of a `proxyjump` line as `(user, host, port)`.
fn jump_hops(v: &str) -> Vec<(Option<String>, String, Option<u16>)> {
    if v.is_empty() || v.eq_ignore_ascii_case("none") {
        return Vec::new();
    }
    reasonix_bootstrap::config::parse_jumps(v)
        .unwrap()
        .into_iter()
        .map(|h| (h.user, h.host, h.port))
        .collect()
}

fn path_list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// OpenSSH's expansion of every `identityfile` value of `g` (see the module comment).
fn identity_expansions(
    c: &Case,
    dir: &Path,
    g: &BTreeMap<String, Vec<String>>,
) -> Result<Vec<String>, String> {
    let mut expanded = Vec::new();
    for raw in g.get("identityfile").cloned().unwrap_or_default() {
        if raw.eq_ignore_ascii_case("none") {
            continue;
        }
        let quoted = format!(
            "IdentityAgent=\"{}\"",
            raw.replace('\\', "\\\\").replace('"', "\\\"")
        );
        let g2 = run_ssh(c, dir, &[quoted])?;
        expanded.push(one(&g2, "identityagent"));
    }
    Ok(expanded)
}

/// The fields that differ, as `field: ssh=… ours=…` lines.
fn compare(
    c: &Case,
    dir: &Path,
    g: &BTreeMap<String, Vec<String>>,
    r: &ResolvedHost,
) -> Result<Vec<String>, String> {
    let mut diffs = Vec::new();
    let mut check = |field: &str, theirs: String, mine: String| {
        if theirs != mine {
            diffs.push(format!("{field}: ssh={theirs:?} ours={mine:?}"));
        }
    };
    check("host", one(g, "host"), r.alias.clone());
    check("user", one(g, "user"), r.user.clone());
    check("hostname", one(g, "hostname"), r.hostname.clone());
    check("port", one(g, "port"), r.port.to_string());
    let expanded = identity_expansions(c, dir, g)?;
    check(
        "identityfile",
        expanded.join(" | "),
        r.identity_files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" | "),
    );
    check(
        "identitiesonly",
        one(g, "identitiesonly"),
        yes_no(r.identities_only),
    );
    let theirs_jump = jump_hops(&one(g, "proxyjump"));
    let mine_jump: Vec<_> = r
        .proxy_jump
        .iter()
        .map(|h| (h.user.clone(), h.host.clone(), h.port))
        .collect();
    check(
        "proxyjump",
        format!("{theirs_jump:?}"),
        format!("{mine_jump:?}"),
    );
    let pc = one(g, "proxycommand");
    let pc = (!pc.is_empty() && !pc.eq_ignore_ascii_case("none")).then_some(pc);
    check(
        "proxycommand",
        format!("{pc:?}"),
        format!("{:?}", r.proxy_command),
    );
    let ukh = one(g, "userknownhostsfile");
    check(
        "userknownhostsfile",
        if ukh == "none" { String::new() } else { ukh },
        path_list(&r.user_known_hosts_files),
    );
    let gkh = one(g, "globalknownhostsfile");
    check(
        "globalknownhostsfile",
        if gkh == "none" { String::new() } else { gkh },
        path_list(&r.global_known_hosts_files),
    );
    check(
        "stricthostkeychecking",
        one(g, "stricthostkeychecking"),
        r.strict_host_key_checking.as_ssh_g().to_string(),
    );
    check(
        "serveraliveinterval",
        one(g, "serveraliveinterval"),
        r.server_alive_interval
            .map_or(0, |d| d.as_secs())
            .to_string(),
    );
    check(
        "serveralivecountmax",
        one(g, "serveralivecountmax"),
        r.server_alive_count_max.to_string(),
    );
    check(
        "connecttimeout",
        one(g, "connecttimeout"),
        r.connect_timeout
            .map_or("none".to_string(), |d| d.as_secs().to_string()),
    );
    check("batchmode", one(g, "batchmode"), yes_no(r.batch_mode));
    check(
        "forwardagent",
        one(g, "forwardagent"),
        match &r.forward_agent_socket {
            Some(p) => p.display().to_string(),
            None => yes_no(r.forward_agent),
        },
    );
    check(
        "hashknownhosts",
        one(g, "hashknownhosts"),
        yes_no(r.hash_known_hosts),
    );
    check(
        "numberofpasswordprompts",
        one(g, "numberofpasswordprompts"),
        r.number_of_password_prompts.to_string(),
    );
    check(
        "passwordauthentication",
        one(g, "passwordauthentication"),
        yes_no(r.password_authentication),
    );
    check(
        "kbdinteractiveauthentication",
        one(g, "kbdinteractiveauthentication"),
        yes_no(r.kbd_interactive_authentication),
    );
    let pk = one(g, "pubkeyauthentication");
    check(
        "pubkeyauthentication",
        (pk != "false" && pk != "no").to_string(),
        r.pubkey_authentication.to_string(),
    );
    let pa = g
        .get("preferredauthentications")
        .and_then(|v| v.first())
        .cloned()
        .unwrap_or_else(|| "publickey,keyboard-interactive,password".into());
    check(
        "preferredauthentications",
        pa,
        r.preferred_authentications.join(","),
    );
    let ia = g.get("identityagent").and_then(|v| v.first()).cloned();
    let mine_ia = r.identity_agent.as_ref().map(|p| p.display().to_string());
    let theirs_ia = match ia.as_deref() {
        None | Some("SSH_AUTH_SOCK") => std::env::var("SSH_AUTH_SOCK")
            .ok()
            .filter(|s| !s.is_empty()),
        Some(v) if v.eq_ignore_ascii_case("none") => None,
        // The legacy `$VAR` form is looked up when ssh connects (ssh -G shows it raw).
        Some(v) if v.starts_with('$') && !v.starts_with("${") => std::env::var(&v[1..]).ok(),
        Some(v) => Some(v.to_string()),
    };
    check(
        "identityagent",
        format!("{theirs_ia:?}"),
        format!("{mine_ia:?}"),
    );
    Ok(diffs)
}

#[test]
fn resolution_equals_ssh_dash_g() {
    // SAFETY of the env edits: this test binary has this one test, run on one thread, and
    // ssh inherits the same variables.
    std::env::set_var("RXT_DIR", "/tmp/rxt-env-dir");
    std::env::set_var("RXT_USER", "envuser");
    std::env::remove_var("RXT_UNSET_VAR");
    std::env::remove_var("SSH_AUTH_SOCK");
    // ssh expands `~` and %d with the password database's home, whatever $HOME says.
    let pw_home = PathBuf::from(
        String::from_utf8(
            Command::new("sh")
                .arg("-c")
                .arg("getent passwd $(id -u) | cut -d: -f6")
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
    );
    let all = cases();
    let mut failures = Vec::new();
    let (mut agree_ok, mut agree_err) = (0, 0);
    for c in &all {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let dir_s = dir.path().display().to_string();
        std::fs::write(dir.path().join("config"), c.config.replace("{DIR}", &dir_s)).unwrap();
        for (n, t) in &c.files {
            std::fs::write(dir.path().join(n), t.replace("{DIR}", &dir_s)).unwrap();
        }
        if let Some(i) = &c.identity {
            std::fs::write(dir.path().join(i), "not a key").unwrap();
        }
        let theirs = run_ssh(c, dir.path(), &[]);
        let mine = ours(c, dir.path(), &pw_home);
        let verdict = match (&theirs, &mine) {
            (Err(_), Err(_)) => {
                agree_err += 1;
                None
            }
            (Err(e), Ok(r)) => Some(format!("ssh refused ({e}) but we resolved {r:?}")),
            (Ok(g), Err(e)) => {
                // ssh -G does not expand IdentityFile; OpenSSH fails only when it connects.
                match identity_expansions(c, dir.path(), g) {
                    Err(_) => {
                        agree_err += 1;
                        None
                    }
                    Ok(_) => Some(format!("ssh resolved but we refused: {e}")),
                }
            }
            (Ok(g), Ok(r)) => match compare(c, dir.path(), g, r) {
                Ok(d) if d.is_empty() => {
                    agree_ok += 1;
                    None
                }
                Ok(d) => Some(d.join("\n  ")),
                Err(e) => Some(format!(
                    "ssh could not expand an IdentityFile ({e}) but we did"
                )),
            },
        };
        if let Some(v) = verdict {
            failures.push(format!(
                "case '{}': dest {:?} opts {:?} -p {:?} -J {:?}\n--- config ---\n{}--- differs ---\n  {v}",
                c.name, c.dest, c.opts, c.port, c.jump, c.config
            ));
        }
    }
    eprintln!(
        "ssh -G oracle: {} cases, {} agree (resolved: {agree_ok}, both refused: {agree_err}), {} differ",
        all.len(),
        agree_ok + agree_err,
        failures.len()
    );
    assert!(all.len() >= 50, "the table must hold at least 50 cases");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
