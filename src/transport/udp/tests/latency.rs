//! The loopback latency and message rate of an endpoint pair (a measurement, ignored).

use super::*;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
#[ignore = "measurement: cargo test --release --lib transport -- --ignored --nocapture"]
fn udp_loopback_latency_and_rate() {
    const ROUNDS: usize = 20_000;
    // Raw socket ping-pong: the floor.
    let a = StdSocket::bind("127.0.0.1:0").unwrap();
    let b = StdSocket::bind("127.0.0.1:0").unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let mut n = 0;
        while n < ROUNDS {
            if let Ok((k, _)) = b.recv_from(&mut buf) {
                b.send_to(&buf[..k], aa).unwrap();
                n += 1;
            }
        }
    });
    let mut buf = [0u8; 64];
    let mut raw = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        a.send_to(&[1u8; 8], ba).unwrap();
        while a.recv_from(&mut buf).is_err() {}
        raw.push(t.elapsed() / 2);
    }
    echo.join().unwrap();

    // The reliable transport, same pattern.
    let mut eps = local(2, UdpConfig::default());
    let mut b = eps.pop().unwrap();
    let mut a = eps.pop().unwrap();
    let echo = std::thread::spawn(move || {
        let mut n = 0;
        let mut reply = false;
        while n < ROUNDS {
            b.poll(Instant::now(), &mut |d| {
                if let Delivery::Message { .. } = d {
                    reply = true;
                }
            })
            .unwrap();
            if reply {
                reply = false;
                while b.send(0, &[2u8; 8], Instant::now()).is_err() {}
                n += 1;
            }
        }
        let t = Instant::now();
        while t.elapsed() < MS(50) {
            b.poll(Instant::now(), &mut |_| {}).unwrap();
        }
        b
    });
    let mut ours = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        while a.send(1, &[1u8; 8], t).is_err() {
            a.poll(Instant::now(), &mut |_| {}).unwrap();
        }
        let mut got = false;
        while !got {
            a.poll(Instant::now(), &mut |d| {
                got |= matches!(d, Delivery::Message { .. });
            })
            .unwrap();
        }
        ours.push(t.elapsed() / 2);
    }
    let b = echo.join().unwrap();

    // Message rate: one sender streaming 8-byte messages to one receiver.
    const STREAM: u64 = 200_000;
    let mut b = b;
    let sink = std::thread::spawn(move || {
        let mut n = 0u64;
        while n < STREAM {
            n += b.poll(Instant::now(), &mut |_| {}).unwrap() as u64;
        }
        let t = Instant::now();
        while t.elapsed() < MS(50) {
            b.poll(Instant::now(), &mut |_| {}).unwrap();
        }
    });
    let t = Instant::now();
    let mut sent = 0;
    while sent < STREAM {
        match a.send(1, &[3u8; 8], Instant::now()) {
            Ok(()) => sent += 1,
            Err(_) => {
                a.poll(Instant::now(), &mut |_| {}).unwrap();
            }
        }
    }
    while a.unacked() > 0 {
        a.poll(Instant::now(), &mut |_| {}).unwrap();
    }
    let rate = STREAM as f64 / t.elapsed().as_secs_f64();
    sink.join().unwrap();
    let (r, o) = (median(raw), median(ours));
    println!(
        "loopback one-way (half ping-pong, 8 B, median of {ROUNDS}): raw socket {:.2} µs, \
         reliable udp {:.2} µs ({:.2}x); stream rate {:.0} msg/s; retransmits {}",
        r.as_secs_f64() * 1e6,
        o.as_secs_f64() * 1e6,
        o.as_secs_f64() / r.as_secs_f64(),
        rate,
        a.stats().retransmits,
    );
}
