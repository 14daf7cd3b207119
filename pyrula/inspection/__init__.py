"""Reading a store for people: select and page exchanges, load one, reassemble a stream, compare
two recordings, describe a run. What `pyrula journal`, `pyrula runs` and `pyrula ui` share.

It sits beside the runtime (it reads the journal and the runs store, and the transport's SSE
framing); the command line and the web page are built on it.
"""
