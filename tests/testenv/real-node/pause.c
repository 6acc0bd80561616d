/* The pod sandbox ("pause") process of the real node: holds the pod's
 * namespaces, reaps orphans, exits on SIGINT/SIGTERM. Built statically
 * because the image holds nothing else. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
static void quit(int s) { (void)s; _exit(0); }
static void reap(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, quit); signal(SIGTERM, quit); signal(SIGCHLD, reap);
  for (;;) pause();
}
