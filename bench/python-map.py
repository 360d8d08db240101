# The official UID2 Python client mapping a CSV's emails the way its docs show: IdentityMapV3Client, one
# generate_identity_map call per 5,000 emails, one after another. Prints {"emails", "mapped"} as JSON.
#   python3 bench/python-map.py BASE_URL FILE   (UID2_API_KEY and UID2_CLIENT_SECRET in the environment)
import csv
import json
import os
import sys

from uid2_client import IdentityMapV3Client, IdentityMapV3Input

base_url, path = sys.argv[1], sys.argv[2]
client = IdentityMapV3Client(base_url, os.environ['UID2_API_KEY'], os.environ['UID2_CLIENT_SECRET'])
with open(path, newline='') as f:
    emails = [row['email'] for row in csv.DictReader(f)]
mapped = 0
for start in range(0, len(emails), 5000):
    response = client.generate_identity_map(IdentityMapV3Input.from_emails(emails[start:start + 5000]))
    mapped += len(response.mapped_identities)
print(json.dumps({'emails': len(emails), 'mapped': mapped}))
