//! Running a helper command (`mkfs.ext4`, `blkzone reset`, fio, …) whose failure must stop
//! a benchmark run.

use std::process::Command;

/// Runs `words[0]` with the rest as arguments and waits for it; an error naming the command,
/// its exit status and its stderr when it cannot start or does not succeed.
pub fn run_checked(words: &[String]) -> Result<(), String> {
    output_checked(words).map(drop)
}

/// As [`run_checked`], returning what the command printed on stdout.
pub fn output_checked(words: &[String]) -> Result<String, String> {
    let (program, args) = words.split_first().ok_or("no command to run")?;
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", words.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "`{}` failed ({}): {}",
            words.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
