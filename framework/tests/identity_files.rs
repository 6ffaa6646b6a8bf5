//! Identity files shared by real processes: creators racing for one path,
//! and a process killed while it saves.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use ternio::Identity;

/// The path a child process works on.
const CHILD_PATH: &str = "TERNIO_IDENTITY_TEST_PATH";

/// This test binary, running only the test `name`, with `path` for it.
fn child(name: &str, path: &Path) -> Child {
    Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_PATH, path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the child starts")
}

/// What follows `tag` on the lines of `child`'s output (the test harness
/// prints its own lines around them). Its output stays open as long as the
/// iterator lives.
fn tagged_lines(child: &mut Child, tag: &str) -> impl Iterator<Item = String> + use<> {
    let tag = tag.to_owned();
    BufReader::new(child.stdout.take().expect("its stdout"))
        .lines()
        .map_while(Result::ok)
        .filter_map(move |line| line.split_once(&tag).map(|(_, rest)| rest.to_owned()))
}

/// Not a test on its own: in a child process, waits for its standard input
/// to close, then prints `KEY <public hex>` of `load_or_generate`, or
/// `ERROR <error>`.
#[test]
fn child_load_or_generate() {
    let Some(path) = std::env::var_os(CHILD_PATH) else {
        return;
    };
    std::io::stdin().read_to_end(&mut Vec::new()).unwrap();
    match Identity::load_or_generate(&path) {
        Ok(identity) => println!("KEY {}", identity.public_hex()),
        Err(error) => println!("ERROR {error}"),
    }
}

#[test]
fn concurrent_creators_agree_on_one_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.key");
    let mut children: Vec<Child> = (0..8)
        .map(|_| child("child_load_or_generate", &path))
        .collect();
    // All started and waiting: let them go at once.
    for child in &mut children {
        drop(child.stdin.take());
    }
    let answers: Vec<String> = children
        .iter_mut()
        .map(|child| {
            // All of its output, then its exit.
            let keys: Vec<String> = tagged_lines(child, "KEY ").collect();
            assert!(child.wait().unwrap().success());
            assert_eq!(keys.len(), 1, "one KEY line, not an error");
            keys.into_iter().next().unwrap()
        })
        .collect();
    let saved = Identity::load(&path).unwrap().public_hex();
    for answer in &answers {
        assert_eq!(answer, &saved, "every process uses the key on disk");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "only the key file is left"
    );
}

/// Not a test on its own: in a child process, saves new identities as
/// `<path>.0`, `<path>.1`, … printing `SAVED <n>` after each, until killed.
#[test]
fn child_saver() {
    let Some(path) = std::env::var_os(CHILD_PATH) else {
        return;
    };
    for n in 0u64.. {
        let mut numbered = path.clone();
        numbered.push(format!(".{n}"));
        Identity::generate().save(&numbered).unwrap();
        println!("SAVED {n}");
    }
}

#[test]
fn a_process_killed_while_saving_leaves_only_complete_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.key");
    let mut saver = child("child_saver", &path);
    let mut saved = tagged_lines(&mut saver, "SAVED ");
    assert_eq!(saved.nth(49).expect("50 keys saved"), "49");
    // SIGKILL, with the output still open so that the saver runs on: it
    // stops wherever the save in progress is.
    saver.kill().unwrap();
    saver.wait().unwrap();
    drop(saved);

    let mut keys = 0;
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.starts_with("server.key.") {
            // Any name that is visible holds a whole key.
            Identity::load(dir.path().join(&name))
                .unwrap_or_else(|error| panic!("{name}: {error}"));
            keys += 1;
        } else {
            assert!(
                name.starts_with(".server.key.") && name.ends_with(".tmp"),
                "only keys and temporary files: {name}"
            );
        }
    }
    assert!(keys >= 50, "{keys} keys");
    // Whatever the kill left behind, saving goes on.
    let identity = Identity::load_or_generate(&path).unwrap();
    assert_eq!(
        Identity::load(&path).unwrap().public_key(),
        identity.public_key()
    );
}
