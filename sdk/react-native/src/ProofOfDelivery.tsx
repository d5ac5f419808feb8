import { useState } from 'react'
import { Pressable, StyleSheet, Switch, Text, TextInput, View } from 'react-native'
import type { ImageSource } from './offline-queue.js'
import {
  missingProofs,
  pinPattern,
  type DocumentType,
  type Verification,
  type PodRequirements,
  type Proof,
  type ProofCapture,
} from './proof.js'

const labels: Record<Proof, string> = {
  signature: 'Signature, with the signer’s name and relationship',
  photo: 'Photo of the handover',
  pin: 'PIN the patient reads out',
  id_check: 'ID check',
  barcode: 'Scan of the Rx label',
}

const documents: { type: DocumentType; label: string }[] = [
  { type: 'drivers_license', label: 'Driver’s license' },
  { type: 'state_id', label: 'State ID' },
  { type: 'passport', label: 'Passport' },
  { type: 'military_id', label: 'Military ID' },
  { type: 'other', label: 'Other' },
]

/**
 * Proof of delivery at the door: shows what the delivery's `pod_requirements` ask for, collects
 * it, and hands the capture to `onCaptured` (queue it with `enqueueDeliver`) once every required
 * proof is there. The app brings its own camera and scanner: `onTakePhoto` and `onScanBarcode`;
 * `onSign` gives the signature as a JPEG or PNG image (the API takes no SVG). Without a
 * requirement a proof is still offered, and sent when taken.
 */
export function ProofOfDelivery({
  requirements,
  verification,
  onTakePhoto,
  onScanBarcode,
  onSign,
  onCaptured,
}: {
  requirements: PodRequirements | null | undefined
  /** From PatientVerification: `deliver` always needs one. */
  verification: Verification
  onTakePhoto?: () => Promise<ImageSource>
  onScanBarcode?: () => Promise<string>
  onSign?: () => Promise<ImageSource>
  onCaptured: (capture: ProofCapture) => void
}) {
  const [photo, setPhoto] = useState<ImageSource>()
  const [pin, setPin] = useState('')
  const [barcode, setBarcode] = useState('')
  const [signature, setSignature] = useState<ImageSource>()
  const [signerName, setSignerName] = useState('')
  const [relationship, setRelationship] = useState('')
  const [documentType, setDocumentType] = useState<DocumentType>()
  const [birthDateVerified, setBirthDateVerified] = useState(false)
  const [problem, setProblem] = useState<string>()
  const required = requirements ?? {}
  const minimumAge = required.id_check?.minimum_age ?? 0
  const accepted = required.id_check?.document_types?.length
    ? documents.filter((d) => required.id_check!.document_types!.includes(d.type))
    : documents

  const capture: ProofCapture = { verification }
  if (photo) capture.photo = photo
  if (pin) capture.pin = pin
  if (barcode) capture.barcode = barcode
  // A signature half filled in is not sent: its image, the signer's name and relationship go together.
  if (signature && signerName.trim() && relationship.trim()) capture.signature = { image: signature, signer_name: signerName, relationship }
  if (documentType) capture.id_check = { document_type: documentType, minimum_age: minimumAge, birth_date_verified: birthDateVerified }
  const missing = missingProofs(requirements, capture)
  const asked = (Object.keys(labels) as Proof[]).filter((p) => (p === 'id_check' ? required.id_check : required[p]))

  const take = (get: (() => Promise<unknown>) | undefined, set: (value: never) => void) => async () => {
    if (!get) return
    setProblem(undefined)
    try {
      set((await get()) as never)
    } catch (error) {
      setProblem(error instanceof Error ? error.message : String(error))
    }
  }

  return (
    <View>
      <Text style={styles.title}>Proof of delivery</Text>
      {asked.length ? (
        <View accessibilityRole="list" style={styles.needs}>
          {asked.map((p) => (
            <Text key={p} accessibilityLabel={`${labels[p]}: ${missing.includes(p) ? 'still needed' : 'done'}`}>
              {missing.includes(p) ? '○' : '●'} {labels[p]}
              {p === 'id_check' && minimumAge > 0 ? `, at least ${minimumAge} years old` : ''}
            </Text>
          ))}
        </View>
      ) : (
        <Text style={styles.hint}>No proof is required for this delivery.</Text>
      )}

      {onTakePhoto ? (
        <Pressable accessibilityRole="button" style={styles.button} onPress={take(onTakePhoto, setPhoto)}>
          <Text>{photo ? 'Retake photo' : 'Take photo'}</Text>
        </Pressable>
      ) : null}

      {required.pin ? (
        <TextInput
          value={pin}
          onChangeText={(t) => setPin(t.replace(/\D/g, '').slice(0, 6))}
          placeholder="PIN (4–6 digits)"
          accessibilityLabel="PIN the patient reads out"
          keyboardType="number-pad"
          maxLength={6}
          secureTextEntry
          style={styles.input}
        />
      ) : null}
      {pin && !pinPattern.test(pin) ? <Text style={styles.problem}>A PIN has 4 to 6 digits.</Text> : null}

      {onScanBarcode ? (
        <Pressable accessibilityRole="button" style={styles.button} onPress={take(onScanBarcode, setBarcode)}>
          <Text>{barcode ? `Rx label scanned: ${barcode}` : 'Scan the Rx label'}</Text>
        </Pressable>
      ) : null}

      {required.id_check ? (
        <View>
          <View style={styles.chips} accessibilityRole="radiogroup" accessibilityLabel="ID document">
            {accepted.map((d) => (
              <Pressable
                key={d.type}
                accessibilityRole="radio"
                accessibilityState={{ checked: d.type === documentType }}
                onPress={() => setDocumentType(d.type)}
                style={[styles.chip, d.type === documentType && styles.chosen]}
              >
                <Text>{d.label}</Text>
              </Pressable>
            ))}
          </View>
          <View style={styles.row}>
            <Switch
              value={birthDateVerified}
              onValueChange={setBirthDateVerified}
              accessibilityLabel={minimumAge > 0 ? `Birth date checked: at least ${minimumAge}` : 'Birth date checked'}
            />
            <Text>{minimumAge > 0 ? `Birth date checked: at least ${minimumAge} years old` : 'Birth date checked on the ID'}</Text>
          </View>
        </View>
      ) : null}

      {onSign ? (
        <View>
          <Pressable accessibilityRole="button" style={styles.button} onPress={take(onSign, setSignature)}>
            <Text>{signature ? 'Sign again' : 'Signature'}</Text>
          </Pressable>
          <TextInput
            value={signerName}
            onChangeText={setSignerName}
            placeholder="Signer’s name"
            accessibilityLabel="Signer’s name"
            style={styles.input}
          />
          <TextInput
            value={relationship}
            onChangeText={setRelationship}
            placeholder="Relationship to the patient (self, spouse, caregiver…)"
            accessibilityLabel="Relationship to the patient"
            style={styles.input}
          />
        </View>
      ) : null}

      {problem ? <Text style={styles.problem}>{problem}</Text> : null}
      <Pressable
        accessibilityRole="button"
        accessibilityState={{ disabled: missing.length > 0 }}
        accessibilityHint={missing.length ? `Still needed: ${missing.map((p) => labels[p]).join('; ')}` : undefined}
        disabled={missing.length > 0}
        style={[styles.submit, missing.length > 0 && styles.disabled]}
        onPress={() => onCaptured(capture)}
      >
        <Text style={styles.submitText}>Delivered</Text>
      </Pressable>
    </View>
  )
}

const styles = StyleSheet.create({
  title: { fontSize: 16, fontWeight: '600', marginBottom: 8 },
  needs: { marginBottom: 12, gap: 4 },
  hint: { color: '#455a64', marginBottom: 12 },
  button: { padding: 12, borderRadius: 6, backgroundColor: '#eceff1', marginBottom: 8 },
  input: { borderWidth: 1, borderColor: '#90a4ae', borderRadius: 6, padding: 10, fontSize: 16, marginBottom: 8 },
  chips: { flexDirection: 'row', flexWrap: 'wrap', gap: 8, marginBottom: 8 },
  chip: { paddingHorizontal: 12, paddingVertical: 8, borderRadius: 16, borderWidth: 1, borderColor: '#90a4ae' },
  chosen: { backgroundColor: '#e0f2f1', borderColor: '#0a7d5a' },
  row: { flexDirection: 'row', alignItems: 'center', gap: 8, marginBottom: 8 },
  problem: { color: '#8c1d18', marginBottom: 8 },
  submit: { marginTop: 12, padding: 14, borderRadius: 6, backgroundColor: '#0a7d5a', alignItems: 'center' },
  disabled: { backgroundColor: '#90a4ae' },
  submitText: { color: '#fff', fontWeight: '700' },
})
