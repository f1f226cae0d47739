"""confluent-kafka (librdkafka) over TLS: produce records to an existing topic with
security.protocol=ssl and the test CA, then consume them back. Prints one JSON
object: the values it read, in order.

Usage: kafka_tls.py BOOTSTRAP CA_FILE TOPIC COUNT
"""

import json
import sys

from confluent_roundtrip import roundtrip


def main(bootstrap, ca, topic, count):
    ssl = {"bootstrap.servers": bootstrap, "security.protocol": "ssl", "ssl.ca.location": ca}
    c, values = roundtrip(ssl, topic, [f"tls-{i}" for i in range(count)], "tls-check")
    c.close()
    print(json.dumps({"values": values}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
