/*
 * udp_pingpong: the raw socket floor for ftcoll's UDP transport (bench/peers/run.sh).
 *
 * Two UDP sockets on 127.0.0.1, connected to each other, non-blocking, busy-polled with
 * recv(MSG_DONTWAIT) (no reliability layer, no headers beyond the payload). Two methods:
 *   - "threads": a pinger and a ponger thread, each owning one socket (pinned to CPUs 0 and 1
 *     when the machine has two or more), the classic ping-pong;
 *   - "single": one thread drives both sockets (send on A, poll B, send on B, poll A), which
 *     is how `ftcoll bench` estimates its LogP RTT (logp_estimate.rtt_ns), so the two are
 *     like-for-like.
 * Each: `warmup` untimed round trips, then `round_trips` timed ones; the RTT of each is taken
 * with CLOCK_MONOTONIC; reports RTT and half-RTT (one-way) percentiles in µs as one JSON line.
 *
 * usage: udp_pingpong [-n ROUND_TRIPS] [-w WARMUP] [-s PAYLOAD_BYTES]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long round_trips = 20000, warmup = 2000, payload = 8;
static int sock_a = -1, sock_b = -1;
static atomic_int ponger_ready;

static void die(const char *what)
{
    fprintf(stderr, "udp_pingpong: %s: %s\n", what, strerror(errno));
    exit(1);
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int open_socket(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    if (s < 0)
        die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a))
        die("bind 127.0.0.1");
    return s;
}

static void connect_to(int s, int peer)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(peer, (struct sockaddr *)&a, &len))
        die("getsockname");
    if (connect(s, (struct sockaddr *)&a, len))
        die("connect");
}

static void send_one(int s, const char *buf)
{
    for (;;) {
        ssize_t r = send(s, buf, (size_t)payload, MSG_DONTWAIT);
        if (r == payload)
            return;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            continue;
        die("send");
    }
}

/* Busy-polls a non-blocking socket until one datagram arrives. */
static void recv_one(int s, char *buf)
{
    for (;;) {
        ssize_t r = recv(s, buf, (size_t)payload, MSG_DONTWAIT);
        if (r == payload)
            return;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            continue;
        if (r >= 0) {
            errno = EPROTO;
            die("short datagram");
        }
        die("recv");
    }
}

static void pin(int cpu)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 2)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu % ncpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
}

static void *ponger(void *arg)
{
    (void)arg;
    pin(1);
    char buf[65536];
    atomic_store(&ponger_ready, 1);
    for (long i = 0; i < warmup + round_trips; i++) {
        recv_one(sock_b, buf);
        send_one(sock_b, buf);
    }
    return NULL;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static double pct_us(const long long *v, long n, double q, double div)
{
    long k = (long)(q * (double)n + 0.999999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return (double)v[k - 1] / 1000.0 / div;
}

static void report(const char *name, long long *rtt)
{
    double sum = 0;
    for (long i = 0; i < round_trips; i++)
        sum += (double)rtt[i];
    qsort(rtt, (size_t)round_trips, sizeof *rtt, cmp_ll);
    long n = round_trips;
    printf("\"%s\":{\"rtt_us\":{\"t_min\":%.3f,\"p50\":%.3f,\"avg\":%.3f,\"p99\":%.3f,\"max\":%.3f},"
           "\"half_rtt_us\":{\"t_min\":%.3f,\"p50\":%.3f,\"avg\":%.3f,\"p99\":%.3f,\"max\":%.3f}}",
           name, pct_us(rtt, n, 0, 1), pct_us(rtt, n, 0.5, 1), sum / n / 1000.0,
           pct_us(rtt, n, 0.99, 1), pct_us(rtt, n, 1, 1), pct_us(rtt, n, 0, 2),
           pct_us(rtt, n, 0.5, 2), sum / n / 2000.0, pct_us(rtt, n, 0.99, 2), pct_us(rtt, n, 1, 2));
}

static long parse(const char *s, long lo, long hi, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "udp_pingpong: error: %s must be an integer in %ld..%ld, got '%s'\n", what,
                lo, hi, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "n:w:s:")) != -1) {
        switch (opt) {
        case 'n':
            round_trips = parse(optarg, 1, 100000000, "-n");
            break;
        case 'w':
            warmup = parse(optarg, 0, 100000000, "-w");
            break;
        case 's':
            payload = parse(optarg, 1, 65507, "-s");
            break;
        default:
            fprintf(stderr, "usage: udp_pingpong [-n ROUND_TRIPS] [-w WARMUP] [-s PAYLOAD_BYTES]\n");
            return 2;
        }
    }
    long long *rtt = malloc((size_t)round_trips * sizeof *rtt);
    char *buf = calloc(1, 65536);
    if (!rtt || !buf)
        die("malloc");
    sock_a = open_socket();
    sock_b = open_socket();
    connect_to(sock_a, sock_b);
    connect_to(sock_b, sock_a);

    printf("{\"impl\":\"raw-udp\",\"payload\":%ld,\"round_trips\":%ld,\"warmup\":%ld,", payload,
           round_trips, warmup);

    /* Two threads, one socket each. */
    pthread_t t;
    if (pthread_create(&t, NULL, ponger, NULL))
        die("pthread_create");
    pin(0);
    while (!atomic_load(&ponger_ready))
        ;
    for (long i = 0; i < warmup + round_trips; i++) {
        long long t0 = now_ns();
        send_one(sock_a, buf);
        recv_one(sock_a, buf);
        if (i >= warmup)
            rtt[i - warmup] = now_ns() - t0;
    }
    pthread_join(t, NULL);
    report("threads", rtt);
    printf(",");

    /* One thread drives both sockets (ftcoll's LogP estimate method). */
    for (long i = 0; i < warmup + round_trips; i++) {
        long long t0 = now_ns();
        send_one(sock_a, buf);
        recv_one(sock_b, buf);
        send_one(sock_b, buf);
        recv_one(sock_a, buf);
        if (i >= warmup)
            rtt[i - warmup] = now_ns() - t0;
    }
    report("single", rtt);
    printf("}\n");
    close(sock_a);
    close(sock_b);
    free(rtt);
    free(buf);
    return 0;
}
