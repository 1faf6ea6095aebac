/*
 * The floor under every server of the change feed, for bench/write-floor.ts (never run by hand):
 * small events written to many loopback TCP sockets with nothing but write(2). Compiled by the
 * bench with `cc -O2`.
 *
 * Usage: write-floor STREAMS RATE SECONDS PER_WRITE FRAME_BYTES
 * Listens on 127.0.0.1, port 0, and prints {"port":P}. Accepts STREAMS connections, makes each
 * non-blocking with TCP_NODELAY (as Node's servers do) and writes it a response head (what it is
 * sent is never read), then prints {"ready":N}. On a line on stdin, writes one FRAME_BYTES event
 * to every socket RATE times a second for SECONDS (PER_WRITE events joined into one write every
 * PER_WRITE ticks), one write() per socket, and prints its CPU over that run (getrusage) and
 * counts as one JSON line. A write that fails with EAGAIN or is short is counted, never retried.
 * Exits when stdin closes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char HEAD[] = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-store\r\nconnection: close\r\n\r\n";

static double tv_us(struct timeval t) { return t.tv_sec * 1e6 + t.tv_usec; }

/* One event of `bytes` bytes, as the Node servers frame it: id, event name, padding, blank line. */
static int frame(char *out, int bytes, long id) {
  int n = snprintf(out, bytes, "id: %ld\nevent: change\ndata: ", id);
  if (n < 0 || n + 2 > bytes) return -1;
  memset(out + n, 'x', bytes - n - 2);
  out[bytes - 2] = '\n';
  out[bytes - 1] = '\n';
  return bytes;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s STREAMS RATE SECONDS PER_WRITE FRAME_BYTES\n", argv[0]);
    return 2;
  }
  int streams = atoi(argv[1]), rate = atoi(argv[2]), seconds = atoi(argv[3]), per = atoi(argv[4]), bytes = atoi(argv[5]);
  if (streams < 1 || rate < 1 || seconds < 1 || per < 1 || bytes < 48) {
    fprintf(stderr, "write-floor: bad arguments\n");
    return 2;
  }
  int one = 1;
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4096) || getsockname(l, (struct sockaddr *)&a, &al)) {
    perror("write-floor: listen");
    return 1;
  }
  printf("{\"port\":%d}\n", ntohs(a.sin_port));
  fflush(stdout);

  int *fd = malloc(sizeof(int) * streams);
  for (int i = 0; i < streams; i++) {
    fd[i] = accept(l, NULL, NULL);
    if (fd[i] < 0) {
      perror("write-floor: accept");
      return 1;
    }
    setsockopt(fd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (write(fd[i], HEAD, sizeof HEAD - 1) != (ssize_t)(sizeof HEAD - 1)) {
      perror("write-floor: head");
      return 1;
    }
    fcntl(fd[i], F_SETFL, fcntl(fd[i], F_GETFL) | O_NONBLOCK);
  }
  printf("{\"ready\":%d}\n", streams);
  fflush(stdout);

  char line[64];
  if (!fgets(line, sizeof line, stdin)) return 0;

  char *buf = malloc((size_t)bytes * per);
  long id = 1000000000, events = 0, writes = 0, eagain = 0, shorts = 0, errors = 0;
  int pending = 0;
  struct rusage r0, r1;
  struct timespec start, at;
  clock_gettime(CLOCK_MONOTONIC, &start);
  getrusage(RUSAGE_SELF, &r0);
  for (long tick = 0; tick < (long)rate * seconds; tick++) {
    /* Tick `tick` is due at start + tick/rate: an absolute schedule, as the Node servers keep. */
    long ns = start.tv_nsec + (long)(tick * (1e9 / rate));
    at.tv_sec = start.tv_sec + ns / 1000000000L;
    at.tv_nsec = ns % 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR) {
    }
    frame(buf + (size_t)bytes * pending, bytes, ++id);
    if (++pending < per) continue;
    size_t len = (size_t)bytes * pending;
    for (int i = 0; i < streams; i++) {
      ssize_t w = write(fd[i], buf, len);
      writes++;
      if (w == (ssize_t)len) events += pending;
      else if (w >= 0) shorts++;
      else if (errno == EAGAIN || errno == EWOULDBLOCK) eagain++;
      else errors++;
    }
    pending = 0;
  }
  getrusage(RUSAGE_SELF, &r1);
  printf("{\"events\":%ld,\"writes\":%ld,\"eagain\":%ld,\"short\":%ld,\"errors\":%ld,\"userMs\":%.3f,\"systemMs\":%.3f}\n", events, writes, eagain, shorts,
         errors, (tv_us(r1.ru_utime) - tv_us(r0.ru_utime)) / 1000, (tv_us(r1.ru_stime) - tv_us(r0.ru_stime)) / 1000);
  fflush(stdout);

  while (fgets(line, sizeof line, stdin)) {
  }
  return 0;
}
