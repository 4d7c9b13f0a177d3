#!/usr/bin/env bash
# Call 1's carry: build-s52x/b.tar.xz, which unpacks to build-s52/: the tree's library and GPU
# tests (at e0910a1, when call 1 ran: prefill v4.38, d 64's 64-row tile carrying the next item's
# S(0); since fc9d190 the tree is v4.37 again). Session 51's build-s51x (v4.37, its prep2.sh) rode
# along as the A/B's old library.
exec bash "$(dirname "$0")/../../build_pack.sh" build-s52 build-s52x
