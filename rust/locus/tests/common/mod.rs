//! What the integration tests share.

/// The statistics are the process's, and the test harness runs tests on parallel threads:
/// each test holds this lock so that another test's allocations do not move its counts.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
