#!/bin/sh
# Open MPI's rsh agent for the fake cluster of tests/helpers/fake_cluster.py (--mca plm_rsh_agent):
# instead of `ssh HOST COMMAND...`, runs COMMAND (orted) inside HOST's network namespace, in a UTS
# namespace of its own whose hostname is HOST's name. BERT_FIN_FAKE_HOSTS maps each host's
# address to its namespace and name: "ADDRESS=NAMESPACE=HOSTNAME ...". Open MPI hands the remote
# command over as words for a shell to join, as ssh does.
set -eu
host=$1
shift
for entry in ${BERT_FIN_FAKE_HOSTS:?"set by tests/helpers/fake_cluster.py"}; do
  address=${entry%%=*}
  rest=${entry#*=}
  if [ "$address" = "$host" ]; then
    exec ip netns exec "${rest%%=*}" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' \
      "${rest#*=}" "$*"
  fi
done
echo "netns_rsh_agent.sh: no fake host $host in BERT_FIN_FAKE_HOSTS=$BERT_FIN_FAKE_HOSTS" >&2
exit 255
