"""The trust boundary: every byte the package reads from or writes to the user's files passes through here.

``lines`` reads text (UTF-8, compressed input, located errors), ``outputs`` puts outputs in place whole or not at
all, ``streams`` writes them (and counts what went where no rename takes it back), and ``modeldir`` reads and
writes model directories (a manifest, checksums checked once at load). The promises they keep, and what they do
not defend, are in docs/reliability.md; the code above this layer trusts them and carries no guard of its own.
"""
