/**
 * What the server of `npm start` (examples/.configu) answers to POST /explain with the first request example of
 * POST /export (./schemas.ts, exportBodyExamples.exampleStore): shown in the OpenAPI document; a test checks that it
 * is the answer (test/server/openapi.test.ts).
 */
export const explainResponseExample = {
  "version": 1,
  "ok": true,
  "values": {
    "API_HOST": "eu.api.example.com",
    "PORT": 8443,
    "LOG_LEVEL": "debug",
    "API_URL": "https://eu.api.example.com:8443"
  },
  "failures": [],
  "explanations": [
    {
      "command": 0,
      "store": "example",
      "set": "production/eu",
      "hierarchy": [
        "",
        "production",
        "production/eu"
      ],
      "evaluated": true,
      "keys": [
        {
          "key": "API_HOST",
          "declared": true,
          "hidden": false,
          "value": "eu.api.example.com",
          "exported": "eu.api.example.com",
          "origin": "store",
          "set": "production/eu",
          "candidates": [
            {
              "set": "",
              "status": "shadowed",
              "value": "localhost"
            },
            {
              "set": "production",
              "status": "shadowed",
              "value": "api.example.com"
            },
            {
              "set": "production/eu",
              "status": "won",
              "value": "eu.api.example.com"
            }
          ],
          "tests": [
            {
              "index": 0,
              "expression": "validator.isFQDN($.value)",
              "passed": true
            }
          ],
          "failures": []
        },
        {
          "key": "PORT",
          "declared": true,
          "hidden": false,
          "value": "8443",
          "exported": 8443,
          "origin": "store",
          "set": "production",
          "candidates": [
            {
              "set": "",
              "status": "shadowed",
              "value": "3000"
            },
            {
              "set": "production",
              "status": "won",
              "value": "8443"
            }
          ],
          "default": {
            "value": "8080"
          },
          "tests": [
            {
              "index": 0,
              "expression": "Number.isInteger($.value) && $.value > 0",
              "passed": true
            }
          ],
          "failures": []
        },
        {
          "key": "LOG_LEVEL",
          "declared": true,
          "hidden": false,
          "value": "debug",
          "exported": "debug",
          "origin": "override",
          "set": "production/eu",
          "candidates": [
            {
              "set": "",
              "status": "shadowed",
              "value": "info"
            },
            {
              "set": "production",
              "status": "overridden",
              "value": "warn"
            }
          ],
          "override": {
            "value": "debug"
          },
          "default": {
            "value": "info"
          },
          "tests": [],
          "failures": []
        },
        {
          "key": "API_URL",
          "declared": true,
          "hidden": false,
          "value": "https://eu.api.example.com:8443",
          "exported": "https://eu.api.example.com:8443",
          "origin": "const",
          "set": "production/eu",
          "candidates": [],
          "const": {
            "template": "https://{{ $.configs.API_HOST.value }}:{{ $.configs.PORT.value }}",
            "computed": true,
            "reads": [
              {
                "key": "API_HOST",
                "origin": "store",
                "value": "eu.api.example.com"
              },
              {
                "key": "PORT",
                "origin": "store",
                "value": "8443"
              }
            ]
          },
          "tests": [],
          "failures": []
        }
      ]
    }
  ],
  "backupStores": []
};
