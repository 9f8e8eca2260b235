//! Real servers on loopback for the alarm tests: a small HTTP/1.1 server that records
//! each request, and Debian's aiosmtpd writing delivered mail to a Maildir.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// One request as the server read it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

/// How the HTTP server answers.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    Status(u16),
    /// Never answers (the connection stays open until the client gives up).
    Hang,
}

/// An HTTP server on 127.0.0.1; stops when dropped.
pub struct HttpServer {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HttpServer {
    pub async fn start(answer: Answer) -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let requests: Arc<Mutex<Vec<Request>>> = Arc::default();
        let seen = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let seen = seen.clone();
                tokio::spawn(async move {
                    let (read, mut write) = socket.into_split();
                    let mut read = BufReader::new(read);
                    // Keep-alive: serve requests on the connection until it closes.
                    loop {
                        let mut line = String::new();
                        if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let mut parts = line.split_whitespace();
                        let method = parts.next().unwrap_or("").to_string();
                        let path = parts.next().unwrap_or("").to_string();
                        let mut headers = HashMap::new();
                        loop {
                            let mut h = String::new();
                            if read.read_line(&mut h).await.unwrap_or(0) == 0 {
                                return;
                            }
                            let h = h.trim_end();
                            if h.is_empty() {
                                break;
                            }
                            if let Some((n, v)) = h.split_once(':') {
                                headers.insert(n.trim().to_ascii_lowercase(), v.trim().to_string());
                            }
                        }
                        let len: usize = headers
                            .get("content-length")
                            .and_then(|l| l.parse().ok())
                            .unwrap_or(0);
                        let mut body = vec![0; len];
                        if read.read_exact(&mut body).await.is_err() {
                            return;
                        }
                        seen.lock().unwrap().push(Request {
                            method,
                            path,
                            headers,
                            body,
                        });
                        match answer {
                            Answer::Hang => {
                                tokio::time::sleep(Duration::from_secs(3600)).await;
                                return;
                            }
                            Answer::Status(code) => {
                                let resp =
                                    format!("HTTP/1.1 {code} X\r\ncontent-length: 2\r\n\r\nok");
                                if write.write_all(resp.as_bytes()).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        HttpServer {
            url,
            requests,
            task,
        }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

/// aiosmtpd on 127.0.0.1 delivering to a Maildir; killed when dropped. `None` (with a
/// printed line) when aiosmtpd is not installed, except under `CI=true`.
pub struct SmtpServer {
    pub port: u16,
    pub maildir: PathBuf,
    child: std::process::Child,
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.maildir);
    }
}

/// The Python that has aiosmtpd: Debian's (`/usr/bin/python3`) first.
fn python() -> Option<&'static str> {
    ["/usr/bin/python3", "python3"].into_iter().find(|p| {
        std::process::Command::new(p)
            .args(["-c", "import aiosmtpd"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

impl SmtpServer {
    pub async fn start() -> Option<SmtpServer> {
        let Some(python) = python() else {
            super::skip("aiosmtpd is not installed (apt-get install python3-aiosmtpd)");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let maildir = std::env::temp_dir().join(format!("jobwheel-mail-{:08x}", fastrand::u32(..)));
        let child = std::process::Command::new(python)
            .args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}")])
            .args(["-c", "aiosmtpd.handlers.Mailbox"])
            .arg(&maildir)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start aiosmtpd");
        let server = SmtpServer {
            port,
            maildir,
            child,
        };
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Some(server);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("aiosmtpd did not listen on port {port} within 5 s");
    }

    /// The delivered messages, raw, waiting up to 5 s for at least `n`.
    pub async fn messages(&self, n: usize) -> Vec<String> {
        for _ in 0..100 {
            let msgs: Vec<String> = std::fs::read_dir(self.maildir.join("new"))
                .map(|d| {
                    d.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
                        .collect()
                })
                .unwrap_or_default();
            if msgs.len() >= n {
                return msgs;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("fewer than {n} messages arrived within 5 s");
    }
}
