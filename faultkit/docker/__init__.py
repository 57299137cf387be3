"""Docker hosts and what faultkit reads from them: the engine client (:mod:`.host`), the
daemon's own state (:mod:`.system`), containers (:mod:`.containers`), host PIDs proven by
their cgroup (:mod:`.hostpid`) and whether a container serves a node's ``base_url``
(:mod:`.baseurl`). Acting on another host's processes or network goes through
:mod:`faultkit.platform`."""
