use super::*;
use crate::config::ServeConfig;
use crate::server::launch_policy;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn startup_err(args: &[&str], env: &[&str], cwds: &[PathBuf]) -> String {
    match LaunchPolicy::from_operator(&s(args), &s(env), cwds) {
        Err(e @ Error::Config(_)) => e.to_string(),
        other => panic!("expected a start-up error, got {other:?}"),
    }
}

fn field_of(e: Error) -> String {
    match e {
        Error::InvalidField { field, .. } => field.into_owned(),
        other => panic!("expected InvalidField, got {other:?}"),
    }
}

#[test]
fn default_set_collides_with_nothing_never_accepted() {
    for f in DEFAULT_ARGS {
        assert!(never_arg(f).is_none(), "{f}");
        assert!(arity_of(f).is_some(), "{f} needs a known arity");
    }
    for (f, _) in KNOWN_ARITY {
        assert!(never_arg(f).is_none(), "{f}");
    }
    let p = LaunchPolicy::from_operator(&s(DEFAULT_ARGS), &[], &[]).unwrap();
    assert_eq!(p, LaunchPolicy::default());
}

#[test]
fn startup_refuses_never_accepted_flags_and_their_variants() {
    for bad in [
        "--dangerously-skip-permissions",
        "--dangerously",
        "--allowedtools",
        "--allowed_tools",
        "--ALLOWED-TOOLS",
        "--permission-mode=",
        "--agent",
        "--sett",
    ] {
        let e = startup_err(&[bad], &[], &[]);
        assert!(
            e.contains("--allow-arg") && e.contains("never"),
            "{bad}: {e}"
        );
    }
    for bad in ["-p", "--", "---x", "--=", "print", "--a b", ""] {
        let e = startup_err(&[bad], &[], &[]);
        assert!(e.contains("--allow-arg"), "{bad}: {e}");
    }
    let p = LaunchPolicy::from_operator(&s(&["--name=", "--betas"]), &[], &[]).unwrap();
    assert!(p.allowed_args().any(|f| f == "--name"));
    assert!(p.allowed_args().any(|f| f == "--betas"));
}

#[test]
fn startup_refuses_never_accepted_env_and_bad_names() {
    for bad in [
        "NODE_OPTIONS",
        "anthropic_base_url",
        "IS_SANDBOX",
        "Claude_Config_Dir",
        "LD_PRELOAD",
        "BASH_FUNC_x%%",
        "https_proxy",
        "PYTHONSTARTUP",
        "GIT_SSH_COMMAND",
        "PATH",
        "ZDOTDIR",
        "GCONV_PATH",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER",
        "BASH_ENV",
        "PERL5LIB",
        "PERLLIB",
        "LESSOPEN",
        "GLIBC_TUNABLES",
        "OPENSSL_CONF",
        "LUA_INIT",
        "EDITOR",
    ] {
        let e = startup_err(&[], &[bad], &[]);
        assert!(e.contains("--allow-env"), "{bad}: {e}");
    }
    for bad in ["1X", "A-B", "A=B", ""] {
        let e = startup_err(&[], &[bad], &[]);
        assert!(e.contains("not a variable name"), "{bad}: {e}");
    }
    let p = LaunchPolicy::from_operator(&[], &s(&["MY_FLAG"]), &[]).unwrap();
    assert_eq!(p.allowed_env().collect::<Vec<_>>(), ["MY_FLAG"]);
}

#[test]
fn startup_refuses_a_missing_cwd_dir() {
    let dir = std::env::temp_dir().join(format!("ah-launch-missing-{}", std::process::id()));
    let e = startup_err(&[], &[], &[dir]);
    assert!(e.contains("--allowed-cwd"), "{e}");
    let file = std::env::current_exe().unwrap();
    let e = startup_err(&[], &[], &[file]);
    assert!(
        e.contains("--allowed-cwd") && e.contains("not a directory"),
        "{e}"
    );
}

#[test]
fn client_args() {
    let p = LaunchPolicy::default();
    for ok in [
        &[][..],
        &["--model", "opus"][..],
        &["--model=opus"],
        &["--max-turns", "3", "--effort=high"],
        &["--disallowedTools", "Bash", "Edit", "--model", "x"],
        &["--disallowed-tools=Bash"],
        &["--append-system-prompt", ""],
        &["--append-system-prompt=-be brief"],
    ] {
        assert!(p.check_args(&s(ok)).is_ok(), "{ok:?}");
    }
    for (bad, at) in [
        (&["--dangerously-skip-permissions"][..], 0),
        (&["--model", "x", "--permission-mode=bypassPermissions"], 2),
        (&["--allowedTools", "Bash"], 0),
        (&["--mod", "x"], 0),
        (&["--Model", "x"], 0),
        (&["-p"], 0),
        (&["--"], 0),
        (&["mcp"], 0),
        (&["--model", "x", "y"], 2),
        (&["--model=x", "y"], 1),
        (&["--disallowedTools=Bash", "Edit"], 1),
        (&["--max-turns"], 0),
        (&["--effort", "high", "--max-turns"], 2),
        (&["--append-system-prompt", "-x"], 0),
        (&["--disallowedTools"], 0),
        (&["--model", "a\0b"], 1),
    ] {
        let e = p.check_args(&s(bad)).unwrap_err();
        assert_eq!(field_of(e), format!("config.args[{at}]"), "{bad:?}");
    }
    let e = p
        .check_args(&s(&["--dangerously-skip-permissions"]))
        .unwrap_err();
    assert!(e.to_string().contains("never accepted"), "{e}");
    let e = p.check_args(&s(&["--betas", "x"])).unwrap_err();
    assert!(e.to_string().contains("--allow-arg"), "{e}");
}

#[test]
fn values_reach_the_argv_joined_to_their_flag() {
    let p = LaunchPolicy::from_operator(&s(&["--name", "--brief"]), &[], &[]).unwrap();
    let args = s(&[
        "--model",
        "mcp",
        "--disallowedTools",
        "Bash",
        "update",
        "--effort=high",
        "--system-prompt",
        "cc://x",
        "--brief",
        "--name",
        "my run",
        "--disallowed-tools=Edit",
    ]);
    assert_eq!(
        p.joined_args(&args).unwrap(),
        s(&[
            "--model=mcp",
            "--disallowedTools=Bash",
            "--disallowedTools=update",
            "--effort=high",
            "--system-prompt=cc://x",
            "--brief",
            "--name=my run",
            "--disallowed-tools=Edit",
        ])
    );
    // Joining again changes nothing.
    let joined = p.joined_args(&args).unwrap();
    assert_eq!(p.joined_args(&joined).unwrap(), joined);
    // Trusting clients, args pass as given.
    let t = LaunchPolicy::trust_clients();
    assert_eq!(t.joined_args(&args).unwrap(), args);
}

#[test]
fn hidden_cli_flags_are_never_accepted() {
    let p = LaunchPolicy::default();
    for flag in [
        "--plugin-dir-no-mcp",
        "--managed-settings",
        "--channels",
        "--dangerously-load-development-channels",
        "--rc",
        "--system-prompt-file",
        "--append-system-prompt-file",
        "--init",
        "--init-only",
        "--maintenance",
        "--rewind-files",
        "--thinking",
        "--max-thinking-tokens",
        "--enable-auto-mode",
    ] {
        let e = startup_err(&[flag], &[], &[]);
        assert!(e.contains("never"), "{flag}: {e}");
        let e = p.check_args(&s(&[&format!("{flag}=x")])).unwrap_err();
        assert!(e.to_string().contains("never accepted"), "{flag}: {e}");
    }
    // A flag that merely begins like a never-accepted one is its own.
    for own in ["--system-prompt", "--append-system-prompt"] {
        assert!(never_arg(own).is_none(), "{own}");
        assert!(p.check_args(&s(&[own, "x"])).is_ok(), "{own}");
    }
}

#[test]
fn operator_flags_of_unknown_arity_take_no_separate_value() {
    let p =
        LaunchPolicy::from_operator(&s(&["--prompt-suggestions", "--brief", "--name"]), &[], &[])
            .unwrap();
    assert!(p.check_args(&s(&["--prompt-suggestions"])).is_ok());
    assert!(p.check_args(&s(&["--prompt-suggestions=false"])).is_ok());
    assert!(
        p.check_args(&s(&["--prompt-suggestions", "false"]))
            .is_err()
    );
    assert!(p.check_args(&s(&["--brief"])).is_ok());
    assert!(p.check_args(&s(&["--brief=1"])).is_err());
    assert!(p.check_args(&s(&["--name", "n"])).is_ok());
}

#[test]
fn client_env() {
    let env = |kv: &[(&str, &str)]| -> HashMap<String, String> {
        kv.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    };
    let p = LaunchPolicy::from_operator(&[], &s(&["MY_FLAG"]), &[]).unwrap();
    assert!(p.check_env(&env(&[("MY_FLAG", "1")])).is_ok());
    let e = p.check_env(&env(&[("my_flag", "1")])).unwrap_err();
    assert_eq!(field_of(e), "config.env.my_flag");
    let e = p
        .check_env(&env(&[
            ("IS_SANDBOX", "1"),
            ("ANTHROPIC_BASE_URL", "http://x"),
        ]))
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("IS_SANDBOX"), "{msg}");
    assert_eq!(field_of(e), "config.env.ANTHROPIC_BASE_URL");
    let e = p.check_env(&env(&[("A-B", "1")])).unwrap_err();
    assert_eq!(field_of(e), "config.env");
    let t = LaunchPolicy::trust_clients();
    assert!(t.check_env(&env(&[("IS_SANDBOX", "1")])).is_ok());
    assert!(t.check_env(&env(&[("A=B", "1")])).is_err());
}

#[test]
fn model_and_resume() {
    for ok in [
        "",
        "opus",
        "claude-sonnet-4-5",
        "us.anthropic.claude:0",
        "a/b@c[1m]",
    ] {
        assert!(check_model(ok).is_ok(), "{ok}");
    }
    assert!(check_model("arn:aws:bedrock:us-east-1:1:inference-profile/x").is_ok());
    for bad in [
        "-p",
        "--dangerously-skip-permissions",
        "a b",
        "a\0",
        &"x".repeat(257),
        // The CLI reads `cc://` as a server to connect to (and then parses
        // its subcommands); a subcommand's name is no model either.
        "cc://x",
        "cc+unix://x",
        "http://evil.example/m",
        "mcp",
        "MCP",
        "update",
        "setup-token",
        "doctor",
    ] {
        assert_eq!(
            field_of(check_model(bad).unwrap_err()),
            "config.model",
            "{bad}"
        );
    }
    assert!(check_resume("0b6c0f5e-1f2a-4c1e-9a4d-3b2a1c0d9e8f").is_ok());
    for bad in ["-x", "a/b", "a:b", "a\0"] {
        assert_eq!(field_of(check_resume(bad).unwrap_err()), "config.resume");
    }
}

#[test]
fn cwd_under_allowed_dirs() {
    let base = std::env::temp_dir().join(format!("ah-launch-cwd-{}", std::process::id()));
    let inside = base.join("in");
    let outside = base.join("out");
    std::fs::create_dir_all(inside.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let link = inside.join("escape");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let p = LaunchPolicy::from_operator(&[], &[], std::slice::from_ref(&inside)).unwrap();
    let sub = inside.join("sub");
    assert_eq!(
        p.check_cwd(sub.to_str().unwrap()).unwrap(),
        Some(sub.canonicalize().unwrap())
    );
    for bad in [&outside, &link, &base.join("in/../out")] {
        match p.check_cwd(bad.to_str().unwrap()) {
            Err(Error::PolicyDenied(_)) => {}
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    // A sibling whose name merely starts with the allowed one.
    let sibling = base.join("in2");
    std::fs::create_dir_all(&sibling).unwrap();
    assert!(p.check_cwd(sibling.to_str().unwrap()).is_err());
    assert!(LaunchPolicy::default().check_cwd("/").unwrap().is_none());
    let mut config = pb::StartConfig {
        cwd: format!("{}/sub/.", inside.display()),
        ..Default::default()
    };
    p.admit(&mut config).unwrap();
    assert_eq!(config.cwd, sub.canonicalize().unwrap().to_str().unwrap());
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn redaction_keeps_names_only() {
    let config = pb::StartConfig {
        env: [("K".to_owned(), "secret".to_owned())].into(),
        ..Default::default()
    };
    assert_eq!(redacted(&config).env["K"], REDACTED);
}

#[test]
fn permission_modes_have_the_operator_as_ceiling() {
    let relay = LaunchPolicy::default();
    for mode in ["", "default", "plan", "dontAsk"] {
        relay.check_permission_mode("mode", mode).unwrap();
    }
    for mode in ["acceptEdits", "auto", "bypassPermissions"] {
        let e = relay.check_permission_mode("mode", mode).unwrap_err();
        assert!(matches!(e, Error::PolicyDenied(_)), "{mode}: {e:?}");
        assert!(e.to_string().contains("--allow-permission-mode"), "{e}");
    }
    for mode in ["Plan", "yolo", "plan ", "--dangerously-skip-permissions"] {
        let e = relay.check_permission_mode("mode", mode).unwrap_err();
        assert_eq!(field_of(e), "mode", "{mode}");
    }
    let mut config = pb::StartConfig {
        permission_mode: "acceptEdits".into(),
        ..Default::default()
    };
    assert!(matches!(
        relay.admit(&mut config),
        Err(Error::PolicyDenied(_))
    ));
    config.permission_mode = "plan".into();
    config.max_thinking_tokens = Some(MAX_THINKING_TOKENS + 1);
    assert_eq!(
        field_of(relay.admit(&mut config).unwrap_err()),
        "config.max_thinking_tokens"
    );

    let wider = LaunchPolicy::default()
        .with_permission_modes(PermissionMode::Relay, &s(&["acceptEdits", " auto"]))
        .unwrap();
    wider.check_permission_mode("mode", "acceptEdits").unwrap();
    wider.check_permission_mode("mode", "auto").unwrap();
    assert!(
        wider
            .check_permission_mode("mode", "bypassPermissions")
            .is_err()
    );

    let skip = LaunchPolicy::default()
        .with_permission_modes(PermissionMode::Skip, &[])
        .unwrap();
    for mode in PERMISSION_MODES {
        skip.check_permission_mode("mode", mode).unwrap();
    }

    for (mode, perms) in [
        ("bypassPermissions", PermissionMode::Relay),
        ("bypassPermissions", PermissionMode::Settings),
        ("yolo", PermissionMode::Skip),
    ] {
        let e = LaunchPolicy::default()
            .with_permission_modes(perms, &s(&[mode]))
            .unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{mode}: {e:?}");
        assert!(e.to_string().contains("--allow-permission-mode"), "{e}");
    }
}

#[test]
fn the_reported_mode_is_held_to_the_same_ceiling() {
    let relay = LaunchPolicy::default();
    for mode in ["", "default", "plan", "dontAsk"] {
        assert!(relay.permission_mode_allowed(mode), "{mode}");
    }
    for mode in ["acceptEdits", "auto", "bypassPermissions", "yolo"] {
        assert!(!relay.permission_mode_allowed(mode), "{mode}");
    }
    let wider = LaunchPolicy::default()
        .with_permission_modes(PermissionMode::Relay, &s(&["acceptEdits"]))
        .unwrap();
    assert!(wider.permission_mode_allowed("acceptEdits"));
    assert!(!wider.permission_mode_allowed("bypassPermissions"));
    let skip = LaunchPolicy::default()
        .with_permission_modes(PermissionMode::Skip, &[])
        .unwrap();
    assert!(skip.permission_mode_allowed("bypassPermissions"));
}

#[test]
fn slash_commands_are_refused_under_every_policy() {
    let fields = slash::InputFields {
        text: "input",
        blocks: "content_blocks",
    };
    for policy in [LaunchPolicy::default(), LaunchPolicy::trust_clients()] {
        let e = policy
            .check_input(fields, "/config permissionMode=acceptEdits", &[])
            .unwrap_err();
        assert_eq!(field_of(e), "input");
        policy.check_input(fields, "/compact", &[]).unwrap();
    }
    let mut cfg = ServeConfig::default();
    cfg.launch.allow_slash_commands = s(&["usage"]);
    let policy = launch_policy(&cfg).unwrap();
    assert_eq!(
        policy.allowed_slash_commands().collect::<Vec<_>>(),
        ["compact", "context", "usage"]
    );
    policy.check_input(fields, "/usage", &[]).unwrap();
    let mut bad = ServeConfig::default();
    bad.launch.allow_slash_commands = s(&["a b"]);
    let e = launch_policy(&bad).unwrap_err().to_string();
    assert!(e.contains("--allow-slash-command"), "{e}");
}
